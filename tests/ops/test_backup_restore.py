"""scripts/backup.sh and scripts/restore.sh, the README's procedure: the demo
organisation with its policy history is dumped, restored into a database the test
creates (empty, then again over itself), and every table's rows, each table's content,
the sequences and the policy history are the same.

PostgreSQL only (the scripts refuse SQLite). The one database this test creates and
drops is `<DATABASE_URL's name>_backup`; it refuses to start if that exists already.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.core.management import call_command
from django.db import connection

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


def url_for(name: str) -> str:
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path=f"/{name}"))


def snapshot(url: str) -> dict:
    """Rows and a digest of the content of every table, the sequences' positions, and
    a digest of the policy history in its order."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        tables = [
            name
            for (name,) in db.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
            )
        ]
        rows, content = {}, {}
        for table in tables:
            count, digest = db.execute(
                "SELECT count(*), "
                "md5(coalesce(string_agg(t::text, chr(10) ORDER BY t::text), '')) "
                f'FROM "{table}" t'
            ).fetchone()
            rows[table], content[table] = count, digest
        sequences = dict(
            db.execute(
                "SELECT sequencename, coalesce(last_value, 0) FROM pg_sequences "
                "WHERE schemaname = 'public' ORDER BY sequencename"
            ).fetchall()
        )
        history = hashlib.sha256()
        for row in db.execute(
            "SELECT id, created_at, actor_id, reason, cause, target, queue_id, share_id, "
            "object_repr, before::text, after::text FROM governance_policychange ORDER BY id"
        ):
            history.update(repr(row).encode())
    return {
        "rows": rows,
        "content": content,
        "sequences": sequences,
        "policy_history": history.hexdigest(),
    }


def tables_of(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        return [
            name
            for (name,) in db.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
            )
        ]


def run(script: str, *args: str, url: str, var: Path) -> str:
    env = {**os.environ, "DATABASE_URL": url, "VAR_DIR": str(var)}
    env.pop("JOB_CHECKPOINT_ROOT", None)
    done = subprocess.run(
        [str(ROOT / "scripts" / script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def scratch_database():
    """`<name>_backup`, created for this test and dropped after it: never another."""
    import psycopg

    if shutil.which("pg_dump") is None or shutil.which("pg_restore") is None:
        pytest.skip("needs pg_dump and pg_restore (Debian: postgresql-client)")
    name = f"{urlsplit(os.environ['DATABASE_URL']).path.lstrip('/')}_backup"
    with psycopg.connect(url_for("postgres"), autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists:
            pytest.fail(f"database {name} exists already: this test only drops its own")
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(url_for("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def recreate(name: str) -> None:
    import psycopg

    with psycopg.connect(url_for("postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')


def test_a_backup_restored_into_an_empty_database_holds_every_row_and_the_history(
    scratch_database, tmp_path, capsys
):
    call_command("seed_demo", "--months", "0")
    var = tmp_path / "var"
    (var / "media" / "packs" / "2026-11").mkdir(parents=True)
    (var / "media" / "packs" / "2026-11" / "pack.pdf").write_bytes(b"%PDF-1.7 pack")
    live = url_for(connection.settings_dict["NAME"])
    scratch = url_for(scratch_database)
    before = snapshot(live)
    assert before["rows"]["governance_policychange"] > 0
    assert before["rows"]["scheduler_jobdefinitionrevision"] > 0

    backup = tmp_path / "backup"
    print(run("backup.sh", str(backup), url=live, var=var))
    assert sorted(p.name for p in backup.iterdir()) == ["SHA256SUMS", "database.dump", "media.tar"]

    recreate(scratch_database)  # dropped and created again: nothing of it is left
    restored_var = tmp_path / "restored-var"
    print(run("restore.sh", str(backup), url=scratch, var=restored_var))
    after = snapshot(scratch)
    assert after == before
    assert (restored_var / "media" / "packs" / "2026-11" / "pack.pdf").read_bytes() == (
        b"%PDF-1.7 pack"
    )

    # Restoring over a database that holds it already (--clean) gives the same again.
    run("restore.sh", "--database-only", str(backup), url=scratch, var=restored_var)
    assert snapshot(scratch) == before

    tables = len(before["rows"])
    total = sum(before["rows"].values())
    size = (backup / "database.dump").stat().st_size
    with capsys.disabled():
        print(
            f"\nbackup/restore: {tables} tables, {total} rows, "
            f"{before['rows']['governance_policychange']} policy changes, dump {size} bytes"
        )


def test_a_damaged_backup_is_not_restored(scratch_database, tmp_path):
    call_command("seed_demo", "--months", "0")
    live = url_for(connection.settings_dict["NAME"])
    backup = tmp_path / "backup"
    run("backup.sh", "--database-only", str(backup), url=live, var=tmp_path / "var")
    with (backup / "database.dump").open("r+b") as dump:
        dump.seek(100)
        dump.write(b"damage")

    env = {**os.environ, "DATABASE_URL": url_for(scratch_database)}
    done = subprocess.run(
        [str(ROOT / "scripts" / "restore.sh"), str(backup)], env=env, capture_output=True, text=True
    )

    assert done.returncode != 0 and "FAILED" in done.stdout + done.stderr
    assert tables_of(url_for(scratch_database)) == []  # nothing was restored
