"""The demo and the replayed history, apart from the product's domain.

It builds the demo organisation (`organisation`: users per role, the AWS sample queue,
the Philly queue), its job definitions and traffic (`jobs`, `tasks`), its exception
requests (`exceptions`) and knowledge articles (`knowledge`), and months of recorded
history replayed through the engine (`history`); `manage.py run_demo` (what `make demo`
runs), `seed_demo`, `seed_knowledge` and `load_history` drive it.

It uses the domain's services as any client does; nothing in the domain imports it.
"""
