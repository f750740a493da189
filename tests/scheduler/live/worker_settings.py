"""Settings of the Celery workers the integration tests start: the product's, with the
process executor's timings shortened so a test sees heartbeats, a stop and a lost
worker within seconds. The database and broker come from the environment, as always."""

from config.settings import *  # noqa: F403

JOB_HEARTBEAT_SECONDS = 0.2
JOB_STOP_GRACE_SECONDS = 2
JOB_HEARTBEAT_TIMEOUT = 3
RUNNER_BEAT_SECONDS = 0.5
JOB_KILL_MARGIN_SECONDS = 1
