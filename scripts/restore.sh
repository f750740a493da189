#!/bin/sh
# Restore a backup made by scripts/backup.sh into DATABASE_URL (see the README,
# "Backup and restore"). Stop web, workers, runners and beat first: the restore replaces
# every table. The database must exist (empty, or the one to overwrite: --clean drops
# and recreates each object the dump holds, in one transaction).
#
#   DATABASE_URL=postgres://... scripts/restore.sh /backups/2026-12-01
#   scripts/restore.sh --database-only DIR     the database alone
#   scripts/restore.sh --files-only DIR        the files alone (e.g. in the runner)
set -eu

usage() { echo "usage: $0 [--database-only | --files-only] DIR" >&2; exit 2; }
files=1
database=1
case "${1:-}" in
  --database-only) files=0; shift ;;
  --files-only) database=0; shift ;;
esac
[ $# -eq 1 ] || usage
src=$1
if [ "$database" -eq 1 ]; then
  : "${DATABASE_URL:?DATABASE_URL must point at the PostgreSQL database to restore into}"
  [ -f "$src/database.dump" ] || { echo "$0: $src/database.dump not found" >&2; exit 2; }
fi
(cd "$src" && sha256sum --check --quiet SHA256SUMS)
var=${VAR_DIR:-var}
checkpoints=${JOB_CHECKPOINT_ROOT:-$var/checkpoints}

if [ "$database" -eq 1 ]; then
  pg_restore --clean --if-exists --no-owner --no-privileges --single-transaction \
    --exit-on-error --dbname="$DATABASE_URL" "$src/database.dump"
fi
if [ "$files" -eq 1 ]; then
  if [ -f "$src/media.tar" ]; then mkdir -p "$var" && tar -C "$var" -xf "$src/media.tar"; fi
  if [ -f "$src/checkpoints.tar" ]; then
    mkdir -p "$checkpoints" && tar -C "$checkpoints" --same-owner -xpf "$src/checkpoints.tar"
  fi
fi
echo "restored $src"
