"""The deployment recipe: .env.example, read as docker compose reads an env_file,
configures a product that passes `check --deploy`, `migrate` and `collectstatic`;
an empty value means the default; a mistyped value stops start-up, naming the variable."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dotenv import dotenv_values

ROOT = Path(__file__).resolve().parents[2]
SECRET = "x7Hq2-production-like-secret-key-for-the-recipe-3kLm9pQ4rT8vW1yZ"


def compose_env(**overrides: str) -> dict[str, str]:
    """The environment a compose service sees: its image's (here: only PATH, so nothing
    from the test run leaks in), then .env, parsed with python-dotenv, whose rules for
    quotes and ` # comments` are those of compose's env_file, then overrides."""
    values = dotenv_values(ROOT / ".env.example")
    env = {"PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": "1"}
    env.update({key: value or "" for key, value in values.items()})
    env.update(overrides)
    return env


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_env_example_is_read_with_inline_comments_stripped():
    values = dotenv_values(ROOT / ".env.example")
    assert values["DJANGO_SECURE"] == "1"
    assert values["VAR_DIR"] == ""
    assert values["JOB_CHECKPOINT_ROOT"] == ""
    assert values["SITE_URL"] == "http://127.0.0.1:8000"
    assert not [key for key, value in values.items() if value and "#" in value]


def test_env_example_lists_every_variable_settings_read():
    """style.md rule 8: .env.example lists them all (settings and gunicorn.conf.py)."""
    import re

    source = (ROOT / "config" / "settings.py").read_text()
    source += (ROOT / "gunicorn.conf.py").read_text()
    read = set(re.findall(r'(?:env_\w+|_per_minute)\(\s*"([A-Z0-9_]+)"', source))
    listed = set(dotenv_values(ROOT / ".env.example"))
    assert read, "no env_* call found in settings"
    assert read - listed == set()


@pytest.mark.slow
def test_env_example_deploys(tmp_path):
    """The README's recipe: copy .env.example to .env, fill in the secret key and the
    host, and start. compose's `environment:` points DATABASE_URL at its database; a
    fresh SQLite file stands in for it here."""
    env = compose_env(
        DJANGO_SECRET_KEY=SECRET,
        DJANGO_ALLOWED_HOSTS="quota.example.com",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
    )
    check = manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "no issues" in check.stdout
    migrate = manage(env, "migrate", "--noinput")
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    # VAR_DIR= is empty in .env.example, so static files would go to the default
    # ./var/static (test_empty_values_mean_the_defaults checks that path); collecting
    # into this checkout would make later tests serve hashed names from a stale
    # manifest, so this run collects into a directory of its own.
    collect = manage({**env, "VAR_DIR": str(tmp_path / "var")}, "collectstatic", "--noinput")
    assert collect.returncode == 0, collect.stdout + collect.stderr
    assert (tmp_path / "var" / "static" / "js" / "app.js").is_file()
    assert (tmp_path / "var" / "static" / "staticfiles.json").is_file()


def test_empty_values_mean_the_defaults(tmp_path):
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.VAR_DIR, s.STATIC_ROOT, s.JOB_CHECKPOINT_ROOT, s.SECURE, "
        "s.DATABASES['default']['CONN_MAX_AGE'], s.TIME_ZONE, sep='|')"
    )
    env = compose_env(
        DJANGO_SECRET_KEY=SECRET,
        DJANGO_SECURE="",
        DATABASE_CONN_MAX_AGE="",
        DJANGO_TIME_ZONE="",
        DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/unused-{tmp_path.name}",
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    var, static, checkpoints, secure, max_age, zone = result.stdout.strip().split("|")
    assert Path(var) == ROOT / "var"
    assert Path(static) == ROOT / "var" / "static"
    assert Path(checkpoints) == ROOT / "var" / "checkpoints"
    assert (secure, max_age, zone) == ("True", "60", "UTC")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DJANGO_SECURE", "ture"),
        ("DJANGO_DEBUG", "maybe"),
        ("DATABASE_CONN_MAX_AGE", "abc"),
        ("DJANGO_HSTS_SECONDS", "-5"),
        ("JOB_HEARTBEAT_TIMEOUT", "30s"),
        ("DJANGO_LOG_LEVEL", "LOUD"),
    ],
)
def test_an_invalid_value_stops_start_up_naming_the_variable(name, value):
    env = compose_env(DJANGO_SECRET_KEY=SECRET, **{name: value})
    result = manage(env, "check")
    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("django.core.exceptions.ImproperlyConfigured:")
    assert f"{name}={value!r}" in last_line
