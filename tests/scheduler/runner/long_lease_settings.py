"""The test workers' settings, with a runner that keeps a process 20 s without renewing
its lease: long enough for a test to stall the database for longer than the old rule
allowed (it stopped the process a grace and a heartbeat before the lease ended), and
for a dead runner's slots to be freed by its liveness alone, not by its leases."""

from tests.scheduler.live.worker_settings import *  # noqa: F403

JOB_HEARTBEAT_TIMEOUT = 20
