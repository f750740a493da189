"""The test workers' settings, with a runner that keeps a process 30 s without renewing
its lease: a 25 s freeze of the runner stays within the lease (the runs of a frozen
runner are fenced by its liveness, see test_frozen_runner.py)."""

from tests.scheduler.live.worker_settings import *  # noqa: F403

JOB_HEARTBEAT_TIMEOUT = 30
