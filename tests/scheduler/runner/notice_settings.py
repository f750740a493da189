"""Settings of the runner worker of the notice test: the test workers', but with the
product's heartbeat (2 s), so a notice that reaches the run sooner than that came by
the broadcast (`ProcessExecutor.notify`), not by the next heartbeat."""

from tests.scheduler.live.worker_settings import *  # noqa: F403

JOB_HEARTBEAT_SECONDS = 2
JOB_HEARTBEAT_TIMEOUT = 6
