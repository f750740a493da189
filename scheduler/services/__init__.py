"""The live scheduler's writes: jobs (`jobs`), job definitions (`job_definitions`),
scheduling passes (`passes`), runs of real programs (`runs`), runners (`runners`)
and start estimates (`estimates`). Views, API views and Celery tasks call these; nothing
else changes a job. The work model they share is `scheduler.work`; they enqueue Celery
tasks by name (`core.celery.task`), so no service imports a task module."""
