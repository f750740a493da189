"""The demo's Celery task: keep jobs flowing through the AWS sample queue.

Registered under its original name, `scheduler.demo_traffic`, so its route (the `demo`
queue) and its beat entry (only when settings.DEMO_TRAFFIC is on) in config/celery.py
still find it.
"""

from __future__ import annotations

from celery import shared_task

from demo.jobs import demo_traffic as traffic_step


@shared_task(name="scheduler.demo_traffic")
def demo_traffic() -> int:
    return len(traffic_step())
