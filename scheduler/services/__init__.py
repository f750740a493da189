"""The live scheduler's writes: jobs (`jobs`), scheduling passes (`passes`) and the work
model they share (`work`). Views, API views and Celery tasks call these; nothing else
changes a job."""
