#!/bin/sh
# Back up what holds the product's state into DIR (see the README, "Backup and restore"):
#   DIR/database.dump     pg_dump of DATABASE_URL, custom format (pg_restore reads it)
#   DIR/media.tar         the files the product made (leadership packs), if any
#   DIR/checkpoints.tar   the jobs' checkpoints (run it where the runner's are), if any
#   DIR/SHA256SUMS        to check the copy before restoring it
# Redis is not backed up: it holds nothing that must survive (the README says why).
#
#   DATABASE_URL=postgres://... scripts/backup.sh /backups/2026-12-01
#   scripts/backup.sh --database-only DIR     the dump alone (e.g. from the db host)
#   scripts/backup.sh --files-only DIR        the files alone (e.g. in the runner)
# Paths come from the same variables as the product's: VAR_DIR (default ./var),
# JOB_CHECKPOINT_ROOT (default $VAR_DIR/checkpoints). Uses pg_dump of the server's
# major version (or newer).
set -eu

usage() { echo "usage: $0 [--database-only | --files-only] DIR" >&2; exit 2; }
files=1
database=1
case "${1:-}" in
  --database-only) files=0; shift ;;
  --files-only) database=0; shift ;;
esac
[ $# -eq 1 ] || usage
dest=$1
if [ "$database" -eq 1 ]; then
  : "${DATABASE_URL:?DATABASE_URL must point at the PostgreSQL database to back up}"
  case "$DATABASE_URL" in
    postgres://*|postgresql://*) ;;
    *) echo "$0: DATABASE_URL is not PostgreSQL (the SQLite demo: copy var/ while it is stopped)" >&2; exit 2 ;;
  esac
fi
var=${VAR_DIR:-var}
checkpoints=${JOB_CHECKPOINT_ROOT:-$var/checkpoints}

mkdir -p "$dest"
# One consistent snapshot of the whole database while the product runs (pg_dump's
# transaction); written to a temporary name so a failed dump is never taken for a backup.
if [ "$database" -eq 1 ]; then
  pg_dump --format=custom --no-owner --no-privileges --dbname="$DATABASE_URL" \
    --file="$dest/database.dump.partial"
  mv "$dest/database.dump.partial" "$dest/database.dump"
fi
if [ "$files" -eq 1 ]; then
  if [ -d "$var/media" ]; then tar -C "$var" -cf "$dest/media.tar" media; fi
  if [ -d "$checkpoints" ]; then tar -C "$checkpoints" -cf "$dest/checkpoints.tar" .; fi
fi
made=$(cd "$dest" && ls database.dump media.tar checkpoints.tar 2>/dev/null || true)
[ -n "$made" ] || { echo "$0: nothing to back up" >&2; exit 1; }
# shellcheck disable=SC2086 # the names are ours, without spaces
(cd "$dest" && sha256sum $made > SHA256SUMS)
echo "backed up to $dest:" $made
