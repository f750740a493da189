"""Settings, read from the environment with embedded defaults.

With no environment at all the product runs on a bare machine: SQLite under
var/, Celery on kombu's filesystem transport under var/, DEBUG off.
Every variable is listed in .env.example.

Every variable is read through one of the env_* helpers below: an unset or empty
variable means the default (docker compose passes `NAME=` from .env as an empty
string), and a value that is not of the variable's type stops start-up with
ImproperlyConfigured naming the variable, rather than silently meaning something else
(`DJANGO_SECURE=ture` must not turn transport security off).
"""

import json
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONCE, NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

from config.test_workers import own_services

BASE_DIR = Path(__file__).resolve().parent.parent
# Under pytest-xdist, this worker's own Redis database and var/ (config/test_workers.py).
own_services(os.environ, BASE_DIR)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def env_str(name: str, default: str) -> str:
    return _env(name) or default


def env_bool(name: str, default: bool) -> bool:
    value = _env(name)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={value!r} is not a boolean: use 1 or 0 (true/false, yes/no, on/off)."
    )


def env_int(name: str, default: int, *, minimum: int | None = 0) -> int:
    value = _env(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a whole number.") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={value!r} must be at least {minimum}.")
    return number


def env_float(name: str, default: float, *, minimum: float | None = 0) -> float:
    value = _env(name)
    if value is None:
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number.") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ImproperlyConfigured(f"{name}={value!r} is not a finite number.")
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={value!r} must be at least {minimum}.")
    return number


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default)
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} is not one of {', '.join(choices)}.")
    return value


def env_path(name: str, default: Path) -> Path:
    value = _env(name)
    return Path(value) if value else Path(default)


VAR_DIR = env_path("VAR_DIR", BASE_DIR / "var")


DEBUG = env_bool("DJANGO_DEBUG", False)


def _local_secret_key() -> str:
    """Without DJANGO_SECRET_KEY, a random key kept in VAR_DIR: never a known default."""
    path = VAR_DIR / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        import secrets

        VAR_DIR.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(50)
        path.write_text(key)
        path.chmod(0o600)
        return key


SECRET_KEY = env_str("DJANGO_SECRET_KEY", "") or _local_secret_key()
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")

# Transport security. On by default; the local demo and the tests serve plain
# http on 127.0.0.1 and turn it off with DJANGO_SECURE=0.
SECURE = env_bool("DJANGO_SECURE", True)
SESSION_COOKIE_SECURE = SECURE
CSRF_COOKIE_SECURE = SECURE
SECURE_SSL_REDIRECT = SECURE and env_bool("DJANGO_SSL_REDIRECT", True)
SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 31536000) if SECURE else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE
SECURE_HSTS_PRELOAD = SECURE
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_REDIRECT_EXEMPT = [r"^healthz/$"]
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# Content-Security-Policy (django-csp): scripts and style sheets only from this site, so
# an injected <script>, inline handler or <style> does not run. Every script of ours is
# a static file (static/js/); chart data is JSON in <script type="application/json">,
# which is never executed. Style *attributes* stay allowed: the usage bars pass their
# figures to CSS as custom properties in style="", and plotly.js and Swagger UI set
# style attributes as they draw; an attribute can restyle the page but not run code.
# plotly.js's own rules go into one <style> element that chart pages provide with the
# request's nonce (templates/components/plotly_style.html). No 'unsafe-eval': the
# chart types we draw need none. data: images are the empty favicon and Swagger UI's icons.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, NONCE],
        "style-src-elem": [SELF, NONCE],
        "style-src-attr": [UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    # `runserver` leaves static files to WhiteNoise, as gunicorn does: Django's own
    # handler serves only the finders' unhashed files, so with DEBUG off and a current
    # collection (hashed names) every asset was missing, --insecure or not.
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "csp",
    "axes",
    "accounts",
    "fleet",
    "governance",
    "scheduler",
    "demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.csp.CSPMiddleware",
    # A database that cannot be reached answers 503 with Retry-After, not 500; outside
    # every middleware that may query (the session's, the user's).
    "core.outage.DatabaseOutageMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    # The user's time zone for reading and showing times (after authentication).
    "accounts.timezones.TimezoneMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes requires: it turns a refused login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# Seconds a client is told to wait (Retry-After) while the database cannot be reached.
DATABASE_OUTAGE_RETRY_AFTER = env_int("DATABASE_OUTAGE_RETRY_AFTER", 5, minimum=1)

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "governance.context_processors.navigation",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
    )
}
PREPARED_STATEMENTS = env_bool("DATABASE_PREPARED_STATEMENTS", True)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("OPTIONS", {})
    DATABASES["default"]["OPTIONS"].update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # The test database is a file too (only tests read TEST; the product's database is
    # NAME). Left unset, Django makes it the shared-cache in-memory database
    # file:memorydb_default?mode=memory&cache=shared, where two connections lock each
    # other's tables and fail at once with "database table is locked" (SQLITE_LOCKED:
    # neither WAL nor the timeout above applies). The browser tests open two: the live
    # server's threads share the connection that was current when it started, and the
    # test's own code gets another once Playwright's sync API has switched the main
    # thread's context (Django keeps connections per context). On a file each thread has
    # its own connection, in WAL, and a writer waits its turn. The pid keeps two runs in
    # one checkout apart; the test run deletes its file at the end.
    DATABASES["default"].setdefault("TEST", {}).setdefault(
        "NAME", str(VAR_DIR / f"test-db-{os.getpid()}.sqlite3")
    )
elif PREPARED_STATEMENTS and DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # PostgreSQL: parameters bound by the server, and a statement run a few times on one
    # connection prepared there, so that its plan is not made again for every request:
    # planning the API's joins cost PostgreSQL more than running them. Turn off behind a
    # pooler in transaction mode (PgBouncer's default), which cannot keep them.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        server_side_binding=True, prepare_threshold=5
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    # First: refuses a locked-out username and address before any password is checked,
    # the directory's included (the LDAP backend below counts failures the same way).
    "axes.backends.AxesStandaloneBackend",
    # Local passwords, for everyone or only the break-glass admins (LOCAL_PASSWORD_LOGIN).
    "accounts.backends.LocalPasswordBackend",
]
# Local accounts stay as break-glass: LOCAL_PASSWORD_LOGIN=0 turns password login off for
# everyone but the admins named in BREAK_GLASS_USERS (comma-separated usernames; each
# must also be an admin). Directory users never have a local password.
LOCAL_PASSWORD_LOGIN = env_bool("LOCAL_PASSWORD_LOGIN", True)
BREAK_GLASS_USERS = env_list("BREAK_GLASS_USERS", "")

# Single sign-on through LDAP (django-auth-ldap on python-ldap), off unless LDAP_SERVER_URI
# is set. The product binds as LDAP_BIND_DN to find the user (LDAP_USER_FILTER under
# LDAP_USER_SEARCH_BASE), binds as the user with their password, then reads their groups
# under LDAP_GROUP_SEARCH_BASE, nested ones included (LDAP_GROUP_TYPE). The directory
# mapping page (/directory/) says which groups give which roles and team memberships;
# governance.directory applies it at each login and every DIRECTORY_SYNC_MINUTES.
LDAP_SERVER_URI = env_str("LDAP_SERVER_URI", "")
DIRECTORY_SYNC_MINUTES = env_float("DIRECTORY_SYNC_MINUTES", 15, minimum=1)
if LDAP_SERVER_URI:
    from config.ldap_settings import ldap_settings

    globals().update(
        ldap_settings(
            server_uri=LDAP_SERVER_URI,
            bind_dn=env_str("LDAP_BIND_DN", ""),
            bind_password=env_str("LDAP_BIND_PASSWORD", ""),
            user_search_base=env_str("LDAP_USER_SEARCH_BASE", ""),
            user_filter=env_str("LDAP_USER_FILTER", "(uid=%(user)s)"),
            group_search_base=env_str("LDAP_GROUP_SEARCH_BASE", ""),
            group_filter=env_str("LDAP_GROUP_FILTER", "(objectClass=groupOfNames)"),
            group_type=env_choice(
                "LDAP_GROUP_TYPE",
                "nested_group_of_names",
                (
                    "nested_group_of_names",
                    "group_of_names",
                    "nested_group_of_unique_names",
                    "nested_active_directory",
                    "posix",
                ),
            ),
            start_tls=env_bool("LDAP_START_TLS", False),
            ca_cert_file=env_str("LDAP_CA_CERT_FILE", ""),
            require_cert=env_choice(
                "LDAP_TLS_REQUIRE_CERT", "demand", ("demand", "allow", "never")
            ),
            timeout=env_float("LDAP_TIMEOUT_SECONDS", 5, minimum=1),
        )
    )
    # Before local passwords: a directory user's login then costs no password hash of
    # their unusable local one (600 ms on a loaded 2-CPU machine, against 50 for LDAP).
    AUTHENTICATION_BACKENDS.insert(1, "governance.directory.ldap.DirectoryLDAPBackend")

# Single sign-on through OpenID Connect (mozilla-django-oidc), off unless OIDC_CLIENT_ID is
# set: the authorization-code flow with PKCE, the ID token checked against the provider's
# JWKS by kid. The endpoints come from OIDC_ISSUER's discovery document unless set one by
# one; the groups claim (OIDC_GROUPS_CLAIM) goes through the same directory mapping as
# LDAP's groups, at each login (governance.directory.oidc).
OIDC_ENABLED = False
OIDC_PROVIDER_NAME = ""
# An OIDC account whose provider issued no refresh token (so the periodic check cannot ask
# about it) loses its API tokens after this long without a sign-in.
OIDC_MAX_IDLE_HOURS = env_float("OIDC_MAX_IDLE_HOURS", 720, minimum=1)
if env_str("OIDC_CLIENT_ID", ""):
    from config.oidc_settings import oidc_settings

    _oidc = oidc_settings(
        client_id=env_str("OIDC_CLIENT_ID", ""),
        client_secret=env_str("OIDC_CLIENT_SECRET", ""),
        issuer=env_str("OIDC_ISSUER", ""),
        authorization_endpoint=env_str("OIDC_AUTHORIZATION_ENDPOINT", ""),
        token_endpoint=env_str("OIDC_TOKEN_ENDPOINT", ""),
        userinfo_endpoint=env_str("OIDC_USERINFO_ENDPOINT", ""),
        jwks_endpoint=env_str("OIDC_JWKS_ENDPOINT", ""),
        logout_endpoint=env_str("OIDC_LOGOUT_ENDPOINT", ""),
        provider_name=env_str("OIDC_PROVIDER_NAME", "single sign-on"),
        scopes=env_str("OIDC_SCOPES", "openid email profile"),
        username_claim=env_str("OIDC_USERNAME_CLAIM", "preferred_username"),
        groups_claim=env_str("OIDC_GROUPS_CLAIM", "groups"),
        sign_algo=env_str("OIDC_SIGN_ALGO", "RS256"),
        verify_tls=env_bool("OIDC_VERIFY_TLS", True),
        timeout=env_float("OIDC_TIMEOUT_SECONDS", 10, minimum=1),
    )
    globals().update(_oidc)
    # First, before django-axes: the provider checks the password (and locks out); a
    # callback carries none to guess, and failed ones (without a username) must not lock
    # every OIDC login from an office's address out.
    AUTHENTICATION_BACKENDS.insert(0, "governance.directory.oidc.DirectoryOIDCBackend")
    # The logout's redirect to the provider's end_session_endpoint (see config.oidc_settings).
    CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"] += _oidc["OIDC_FORM_ACTION_ORIGINS"]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = env_str("DJANGO_TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
# WhiteNoise warns about a missing STATIC_ROOT; collectstatic fills it for production.
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "config.staticfiles.PackageAssetFinder",
]
# Files the product makes (the monthly leadership packs), never served as static.
MEDIA_ROOT = VAR_DIR / "media"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Hashed names and compressed copies once collected (config.staticfiles).
    "staticfiles": {"BACKEND": "config.staticfiles.CollectedStaticFilesStorage"},
}
# Third-party browser assets are served from the installed packages, never a CDN.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# The product's public address, for links in emails (no trailing slash).
SITE_URL = env_str("SITE_URL", "http://127.0.0.1:8000")
EMAIL_BACKEND = env_str("DJANGO_EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DJANGO_DEFAULT_FROM_EMAIL", "quota-governance@localhost")
# Where the file-based e-mail backend writes (the demo's outbox: run_demo).
EMAIL_FILE_PATH = env_str("DJANGO_EMAIL_FILE_PATH", str(VAR_DIR / "outbox"))


def _per_minute(name: str, default: int) -> str | None:
    """A DRF rate from a count per minute; 0 turns that throttle off."""
    count = env_int(name, default)
    return f"{count}/min" if count else None


REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "accounts.authentication.ExpiringTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "core.api.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "core.api.errors.exception_handler",
    # DRF's three, the JSON one refusing bodies nested deeper than 64 levels (a 400, not
    # the RecursionError json.loads raises on deep input).
    "DEFAULT_PARSER_CLASSES": [
        "core.api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # JSON only; the browsable API (HTML forms over every endpoint) only when debugging.
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        *(["rest_framework.renderers.BrowsableAPIRenderer"] if DEBUG else []),
    ],
    "DEFAULT_THROTTLE_CLASSES": [
        "accounts.throttling.UserReadWriteThrottle",
        "accounts.throttling.AnonymousThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "read": _per_minute("API_THROTTLE_READS_PER_MINUTE", 1200),
        "write": _per_minute("API_THROTTLE_WRITES_PER_MINUTE", 120),
        "anon": _per_minute("API_THROTTLE_ANONYMOUS_PER_MINUTE", 60),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Quota governance API",
    "DESCRIPTION": "Queues, quota shares, teams, instance types, urgency definitions "
    "and the policy history of a shared GPU training fleet.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # No deep links: each operation's path is then plain text, not a link inside the
    # operation's toggle button (axe: nested-interactive).
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # One documented error shape on every operation (core.api.schema).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.api.schema.document_errors",
    ],
    # Enums named by what they list, where one field name ("kind", "state") has two sets.
    "ENUM_NAME_OVERRIDES": {
        "ExceptionKindEnum": "fleet.models.UrgencyDefinition.Kind",
        "ArticleKindEnum": "governance.models.KnowledgeArticle.Kind",
        "ShareStateEnum": "fleet.models.QuotaShare.State",
        "ExceptionStateEnum": "governance.models.ExceptionRequest.State",
        "WorkloadKindEnum": "governance.models.WhatIfComparison.Workload",
    },
}

# API tokens (accounts): lifetime when the client names none, and the longest allowed.
API_TOKEN_DAYS = env_int("API_TOKEN_DAYS", 30, minimum=1)
API_TOKEN_MAX_DAYS = env_int("API_TOKEN_MAX_DAYS", 365, minimum=API_TOKEN_DAYS)
# How long a token's user, roles and teams are kept in the cache (accounts.identity);
# any change to them takes effect at once anyway. 0 reads them on every request.
API_IDENTITY_CACHE_SECONDS = env_int("API_IDENTITY_CACHE_SECONDS", 60, minimum=0)

# Login lockouts (django-axes): after LOGIN_FAILURE_LIMIT failed logins for one username
# from one address, that pair is refused for LOGIN_LOCKOUT_MINUTES, even with the right
# password; each further try restarts the wait. Admins see and lift them at
# /accounts/lockouts/. Behind a proxy every client has the proxy's address, so the
# lockout is then per username.
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_float("LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "accounts.views.locked_out"

# Celery: Redis when REDIS_URL is set, otherwise kombu's filesystem transport
# under var/, so the demo needs no server.
REDIS_URL = env_str("REDIS_URL", "")
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    # A Redis that hangs (lost network) would hold whoever sends a task, a request
    # after its commit included, until the kernel gives up: connects and replies are
    # bounded instead (above the workers' 1 s wait for a message).
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "socket_connect_timeout": 1,
        "socket_timeout": 5,
        "max_retries": 0,
    }
else:
    _queue_dir = VAR_DIR / "celery"
    CELERY_BROKER_URL = "filesystem://"
    for _folder in ("queue", "processed", "control"):
        (_queue_dir / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue_dir / "queue"),
        "data_folder_out": str(_queue_dir / "queue"),
        "processed_folder": str(_queue_dir / "processed"),
        "control_folder": str(_queue_dir / "control"),
        "store_processed": False,
    }
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", REDIS_URL) or None

# The cache holds the API throttles' counters: Redis when REDIS_URL is set, so every
# web process counts against the same limits; otherwise this process's memory, which is
# enough for the single-process demo. While Redis is unreachable a request goes without
# it (core.cache): a connect gives up after half a second, a command after a second,
# and the process then stops asking for CIRCUIT_SECONDS.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "core.cache.SharedClientRedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "qg",
            "OPTIONS": {
                "socket_connect_timeout": 0.5,
                "socket_timeout": 1.0,
                "CIRCUIT_SECONDS": 2.0,
            },
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# Liveness marks other processes read (the scheduler's last tick, for /healthz/): Redis
# when set, otherwise files under VAR_DIR (the demo's processes share one machine).
CACHES["liveness"] = (
    {**CACHES["default"], "KEY_PREFIX": "qg-liveness"}
    if REDIS_URL
    else {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": str(VAR_DIR / "liveness"),
    }
)
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

LOG_LEVEL = env_choice(
    "DJANGO_LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
)
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "no_client_error_traceback": {"()": "config.logfilters.ClientErrorWithoutTraceback"}
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["no_client_error_traceback"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# The exceptions sweep's period (governance.exceptions.tasks): a window starts or ends at
# most this late.
EXCEPTIONS_SWEEP_SECONDS = 60.0

# The live scheduler.
# Simulated executor: how many simulated seconds of work pass per real second.
SIMULATED_SECONDS_PER_SECOND = env_int("SIMULATED_SECONDS_PER_SECOND", 60)
SCHEDULER_TICK_SECONDS = env_int("SCHEDULER_TICK_SECONDS", 2)
# The repair sweep; often, as it also requeues the runs of dead runners (seconds after
# their death, see RUNNER_DEAD_AFTER_SECONDS); cheap when there is nothing to repair.
JOB_SWEEP_SECONDS = env_int("JOB_SWEEP_SECONDS", 1)
JOB_HEARTBEAT_SECONDS = env_int("JOB_HEARTBEAT_SECONDS", 2)
# How long a runner keeps a run's process without renewing its lease (a database
# stall shorter than this stops nothing); the lease is this plus the definition's
# grace plus JOB_KILL_MARGIN_SECONDS, and the sweep requeues a run at its end. A run no
# runner claimed within it is requeued too. 40 s: a 30 s lock on the job table
# (a heartbeat that hangs) stops no running job.
JOB_HEARTBEAT_TIMEOUT = env_int("JOB_HEARTBEAT_TIMEOUT", 40, minimum=1)
JOB_KILL_MARGIN_SECONDS = env_float("JOB_KILL_MARGIN_SECONDS", 3, minimum=0.5)
# Stopping sends SIGTERM, then SIGKILL after the definition's grace (this one without).
JOB_STOP_GRACE_SECONDS = env_int("JOB_STOP_GRACE_SECONDS", 10)
JOB_CHECKPOINT_ROOT = env_path("JOB_CHECKPOINT_ROOT", VAR_DIR / "checkpoints")
# The Slurm executor (scheduler.executors.slurm): its reconciliation's period, each Slurm
# command's timeout, the prefix of its Slurm jobs' names (one per installation sharing a
# cluster), and when a submitter's unfinished claim is taken over (after a crash).
SLURM_RECONCILE_SECONDS = env_float("SLURM_RECONCILE_SECONDS", 1, minimum=0.2)
# The executors' reconciliation tick (scheduler.executor_reconcile); the Slurm period
# above unless set.
EXECUTOR_RECONCILE_SECONDS = env_float(
    "EXECUTOR_RECONCILE_SECONDS", SLURM_RECONCILE_SECONDS, minimum=0.2
)
SLURM_COMMAND_TIMEOUT = env_float("SLURM_COMMAND_TIMEOUT", 10, minimum=0.5)
# How long checking a queue's binding (does the partition exist?) waits for the cluster
# while an admin saves it (scheduler.executors.slurm.binding): a page must answer.
SLURM_BIND_TIMEOUT = env_float("SLURM_BIND_TIMEOUT", 3, minimum=0.5)
SLURM_JOB_PREFIX = env_str("SLURM_JOB_PREFIX", "gpuq")
SLURM_SUBMIT_STALE_SECONDS = env_float("SLURM_SUBMIT_STALE_SECONDS", 30, minimum=1)
# How much longer than its grace and kill margin a new attempt waits for an earlier
# attempt of the same job to let go of the checkpoint lock (then: checkpoint_busy).
SLURM_CHECKPOINT_WAIT_SECONDS = env_float("SLURM_CHECKPOINT_WAIT_SECONDS", 30, minimum=0)
# Self-fencing (scheduler.executors.slurm.launch): a run's launcher kills its program
# when it cannot confirm with Slurm for this long that its job still runs; a run Slurm
# ended without the launcher's exit record keeps its capacity this plus the kill margin.
SLURM_FENCE_SECONDS = env_float("SLURM_FENCE_SECONDS", 20, minimum=2)
# A run Slurm has not started this long after its submission (STARTING: a partition
# down, GPUs held by jobs the product did not start) is cancelled and requeued
# (slurm_pending), so Slurm's scheduler never chooses among the product's jobs.
SLURM_STARTING_TIMEOUT_SECONDS = env_float("SLURM_STARTING_TIMEOUT_SECONDS", 60, minimum=1)
# The account a root submitter runs Slurm jobs as (sbatch --uid/--gid), an unprivileged
# one; without it a root submitter refuses to submit unless SLURM_ALLOW_ROOT (the local
# demo only). A submitter that is not root runs jobs as itself (Slurm's own rule).
SLURM_JOB_USER = env_str("SLURM_JOB_USER", "")
SLURM_ALLOW_ROOT = env_bool("SLURM_ALLOW_ROOT", False)
# Runners (workers of `process` queues). A root runner runs jobs as RUNNER_USER, an
# unprivileged account, and refuses to run them as root unless RUNNER_ALLOW_ROOT (only
# the local demo sets it). They report themselves alive every RUNNER_BEAT_SECONDS.
RUNNER_USER = env_str("RUNNER_USER", "")
RUNNER_ALLOW_ROOT = env_bool("RUNNER_ALLOW_ROOT", False)
# A runner that cannot give jobs an empty network namespace (no CAP_SYS_ADMIN as root, no
# user namespaces otherwise) refuses jobs whose definition does not allow network, unless
# this is set: then it runs them on its own network (scheduler.executors.process.run).
RUNNER_ALLOW_HOST_NETWORK = env_bool("RUNNER_ALLOW_HOST_NETWORK", False)
RUNNER_BEAT_SECONDS = env_int("RUNNER_BEAT_SECONDS", 5, minimum=1)
# PostgreSQL: a runner holds a liveness lock all its life and confirms it this often; a
# runner whose lock stayed free RUNNER_DEAD_AFTER_SECONDS is dead and its runs are
# requeued (a live runner that could not confirm its lock that long stopped them).
RUNNER_LIVENESS_CHECK_SECONDS = env_float("RUNNER_LIVENESS_CHECK_SECONDS", 0.5, minimum=0.1)
RUNNER_DEAD_AFTER_SECONDS = env_float("RUNNER_DEAD_AFTER_SECONDS", 6, minimum=2)
# /healthz/ says "degraded" when a live runner's clock is off the database's by more.
RUNNER_CLOCK_SKEW_LIMIT_SECONDS = env_float("RUNNER_CLOCK_SKEW_LIMIT_SECONDS", 2, minimum=0)

# The demo keeps jobs flowing through its AWS sample queue (make demo turns it on).
DEMO_TRAFFIC = env_bool("DEMO_TRAFFIC", False)

# Product settings.
# When true, a draft policy needs another admin's approval before it is applied.
POLICY_CHANGES_NEED_REVIEW = env_bool("POLICY_CHANGES_NEED_REVIEW", False)
# The currency of the instance types' prices per hour and of the dashboard's cost
# figures (an ISO 4217 code, shown beside every amount).
COST_CURRENCY = env_str("COST_CURRENCY", "USD").strip().upper() or "USD"


# /metrics, Prometheus's exposition format (fleet/metrics.py): off unless a scrape token
# or an allowed address is set. A scraper sends `Authorization: Bearer <METRICS_TOKEN>`
# or connects from an address in METRICS_ALLOWED_ADDRESSES (CIDRs), judged on the
# connection's own address (REMOTE_ADDR): no X-Forwarded-For is trusted, so behind a
# proxy every client has the proxy's address, and the proxy's address must not be listed.
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
if METRICS_TOKEN and len(METRICS_TOKEN) < 16:
    raise ImproperlyConfigured("METRICS_TOKEN must be at least 16 characters (random).")


def _metrics_allowed_addresses() -> list[str]:
    import ipaddress

    networks = []
    for item in env_list("METRICS_ALLOWED_ADDRESSES", ""):
        try:
            networks.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError:
            raise ImproperlyConfigured(
                f"METRICS_ALLOWED_ADDRESSES: {item!r} is not an address or a CIDR block "
                "(e.g. 10.0.0.0/8, 127.0.0.1, ::1)."
            ) from None
    return networks


METRICS_ALLOWED_ADDRESSES = _metrics_allowed_addresses()
# Time to reclaim on /metrics: the reclaim episodes that ended in the last this many hours.
METRICS_RECLAIM_WINDOW_HOURS = env_float("METRICS_RECLAIM_WINDOW_HOURS", 24, minimum=0.01)


def _aws_batch_queue_arns() -> dict[str, str]:
    value = _env("AWS_BATCH_QUEUE_ARNS")
    try:
        arns = json.loads(value) if value else {}
    except ValueError:
        arns = None
    if not isinstance(arns, dict) or not all(
        isinstance(name, str) and isinstance(arn, str) for name, arn in arns.items()
    ):
        raise ImproperlyConfigured(
            f"AWS_BATCH_QUEUE_ARNS={value!r} is not a JSON object of queue name to job queue "
            'ARN, e.g. {"aws-sample": "arn:aws:batch:us-east-1:123456789012:job-queue/sample"}.'
        )
    return arns


# Policy as code: after a policy file is applied, push each queue named in
# AWS_BATCH_QUEUE_ARNS to that AWS Batch job queue (credentials from the usual AWS
# environment), and show the drift on the queue's policy-as-code page.
AWS_BATCH_SYNC = env_bool("AWS_BATCH_SYNC", False)
AWS_BATCH_QUEUE_ARNS = _aws_batch_queue_arns()
