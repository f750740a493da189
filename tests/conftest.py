"""Shared test set-up: which real services are available, and role fixtures.

Tests that need PostgreSQL, Redis (with a real Celery worker), Chromium or a Slurm
cluster run against them when DATABASE_URL / REDIS_URL are set, chromium is installed
and SLURM_CONF names a cluster that answers (scripts/slurm/cluster.sh start); those
marked sso against an LDAP directory (LDAP_TEST_URI's, or a slapd the tests start with
scripts/ldap/slapd.sh when slapd is installed) or the OIDC provider process
(oidc-provider-mock), whichever their fixtures start (sso_missing); they are
skipped with a message otherwise. With REQUIRE_SERVICES=1 a missing
service is a failure instead.
"""

import os
import shutil
import subprocess

import pytest

REQUIRE_SERVICES = os.environ.get("REQUIRE_SERVICES", "") in {"1", "true", "yes"}
CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"


def service_missing() -> dict[str, str]:
    """Map of marker name -> why its service is unavailable (empty when all are there)."""
    missing = {}
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        missing["postgres"] = "DATABASE_URL does not point at PostgreSQL"
    if not os.environ.get("REDIS_URL"):
        missing["redis"] = "REDIS_URL is not set"
    if not os.path.exists(CHROMIUM):
        missing["browser"] = f"chromium not found at {CHROMIUM}"
    slurm = slurm_missing()
    if slurm:
        missing["slurm"] = slurm
    return missing


# The sso marker covers two servers: each test is held to the one its fixtures start
# (sso_missing), so an OIDC test never skips for want of slapd, nor the other way round.
LDAP_FIXTURES = frozenset({"ldap_server", "directory", "ldap_login"})
OIDC_FIXTURES = frozenset({"oidc_provider", "oidc_login", "oidc_provider_without_refresh"})


def oidc_missing() -> str:
    """Why the OIDC provider cannot run ("" when oidc-provider-mock is installed; its
    fixture says so when the process does not start)."""
    try:
        import oidc_provider_mock  # noqa: F401
    except ImportError:
        return "the OIDC provider oidc-provider-mock is not installed (pip install -e '.[test]')"
    return ""


def sso_missing(fixturenames) -> str:
    """Why an sso test with these fixtures cannot run ("" when its servers are there)."""
    names = set(fixturenames)
    why = []
    if names & LDAP_FIXTURES and _LDAP_MISSING:
        why.append(_LDAP_MISSING)
    if names & OIDC_FIXTURES and _OIDC_MISSING:
        why.append(_OIDC_MISSING)
    return "; ".join(why)


SLAPD_SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "ldap", "slapd.sh")


def ldap_missing() -> str:
    """Why there is no LDAP directory to test on ("" when LDAP_TEST_URI's slapd answers,
    or when slapd is installed, so that the tests can start one: scripts/ldap/slapd.sh)."""
    uri = os.environ.get("LDAP_TEST_URI", "")
    if uri:
        try:
            answer = subprocess.run(
                [
                    "ldapwhoami",
                    "-x",
                    "-H",
                    uri,
                    "-D",
                    os.environ.get("LDAP_TEST_BIND_DN", ""),
                    "-w",
                    os.environ.get("LDAP_TEST_BIND_PASSWORD", ""),
                ],
                capture_output=True,
                text=True,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"the directory of LDAP_TEST_URI={uri} does not answer ({error})"
        if answer.returncode != 0:
            return f"the directory of LDAP_TEST_URI={uri} does not answer: {answer.stderr.strip()}"
        return ""
    for program in ("slapd", "slapadd", "ldapmodify"):
        if not (shutil.which(program) or os.path.exists(f"/usr/sbin/{program}")):
            return (
                f"{program} is not installed (apt-get install --no-install-recommends slapd "
                "ldap-utils) and LDAP_TEST_URI is not set (scripts/ldap/slapd.sh start prints it)"
            )
    return ""


def slurm_missing() -> str:
    """Why there is no Slurm cluster to test on ("" when SLURM_CONF's cluster answers)."""
    conf = os.environ.get("SLURM_CONF", "")
    if not conf:
        return "SLURM_CONF is not set (scripts/slurm/cluster.sh start prints it)"
    if not os.path.exists(conf):
        return f"SLURM_CONF={conf} does not exist"
    try:
        answer = subprocess.run(
            ["sinfo", "--noheader", "--format=%t"],
            capture_output=True,
            text=True,
            timeout=10,
            env={**os.environ, "SLURM_CONF": conf},
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"the Slurm cluster of SLURM_CONF={conf} does not answer ({error})"
    if answer.returncode != 0:
        return f"the Slurm cluster of SLURM_CONF={conf} does not answer: {answer.stderr.strip()}"
    return ""


_MISSING = service_missing()
_LDAP_MISSING = ldap_missing()
_OIDC_MISSING = oidc_missing()


def pytest_runtest_setup(item):
    missing = dict(_MISSING)
    if item.get_closest_marker("sso"):
        sso = sso_missing(getattr(item, "fixturenames", ()))
        if sso:
            missing["sso"] = sso
    for marker, why in missing.items():
        if item.get_closest_marker(marker):
            if REQUIRE_SERVICES:
                pytest.fail(f"REQUIRE_SERVICES=1 but {why}", pytrace=False)
            pytest.skip(f"needs {marker}: {why}")


# Tests that start processes of their own (marker `spawns`): those of the service
# markers (Chromium, a Celery worker, Slurm jobs, slapd or the OIDC provider), those
# using a fixture that starts a server, those of a module that imports subprocess, and
# the runner's tests (each starts runners and their jobs). A module may also say so
# itself (pytestmark).
SPAWNING_MARKERS = ("browser", "redis", "slurm", "sso")
SPAWNING_FIXTURES = frozenset({"start_worker", "live_server", "slow_server"})
SPAWNING_FOLDERS = (os.path.join("tests", "scheduler", "runner") + os.sep,)


# First: pytest-xdist's own hook reads the groups to send each group to one worker.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        path = str(item.path)
        if (
            any(item.get_closest_marker(name) for name in SPAWNING_MARKERS)
            or SPAWNING_FIXTURES & set(getattr(item, "fixturenames", ()))
            or "subprocess" in vars(getattr(item, "module", None) or object)
            or any(folder in path for folder in SPAWNING_FOLDERS)
        ):
            item.add_marker(pytest.mark.spawns)
            # Under pytest-xdist (make test: -n 2 --dist loadgroup) they run one after
            # another on one worker, as without it: they share daemons (the Slurm
            # cluster, slapd), ports and the machine's time with each other.
            item.add_marker(pytest.mark.xdist_group("spawns"))


@pytest.fixture(autouse=True)
def fresh_throttle_counters():
    """Each test starts with empty API throttle counters (accounts.throttling): user ids
    repeat from test to test (SQLite) and from run to run (a new test database), and a
    counter lives a minute. Only the throttles' keys go: Redis also holds Celery's queues."""
    from django.core.cache import cache

    if hasattr(cache, "_cache") and hasattr(cache._cache, "get_client"):
        client = cache._cache.get_client(write=True)
        for key in client.scan_iter(match=cache.make_key("throttle_*")):
            client.delete(key)
    else:
        cache.clear()


# Role fixtures (style rule 12): one user per role, plus an outsider with no role.


@pytest.fixture
def admin(db):
    from tests.factories import UserFactory

    return UserFactory(username="admin-user", roles=["admins"])


@pytest.fixture
def team_lead(db):
    from tests.factories import UserFactory

    return UserFactory(username="lead-user", roles=["team_leads"])


@pytest.fixture
def exception_owner(db):
    from tests.factories import UserFactory

    return UserFactory(username="owner-user", roles=["exception_owners"])


@pytest.fixture
def leadership(db):
    from tests.factories import UserFactory

    return UserFactory(username="leader-user", roles=["leadership"])


@pytest.fixture
def outsider(db):
    from tests.factories import UserFactory

    return UserFactory(username="outsider-user")


@pytest.fixture
def aws_queue(db):
    from tests.factories import aws_sample_queue

    return aws_sample_queue()
