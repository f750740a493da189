"""The test workers' settings, with the product's keeping time (`JOB_HEARTBEAT_TIMEOUT`,
40 s): a runner rides out a 30 s lock on the job table as the product's would."""

from tests.scheduler.live.worker_settings import *  # noqa: F403

JOB_HEARTBEAT_TIMEOUT = 40
