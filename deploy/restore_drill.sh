#!/bin/sh
# The restore drill (docs/operations.md, "Backups"): a backup of deploy/backup.sh restored
# beside the live site, into a scratch database (gamut_drill) and a scratch folder, then
# checked: the schema is the code's, and every photo the database names is in the restored
# folder and decodes. Nothing live is touched; the scratch copies are dropped at the end.
#   sudo -u gamut deploy/restore_drill.sh /var/backups/gamut/YYYY-MM-DD
# The database role needs CREATEDB (docs/production.md's native steps create it so).
set -eu
cd "$(dirname "$0")/.."
set -a
. "${GAMUT_DOTENV:-./.env}"
set +a
dir=${1:?usage: deploy/restore_drill.sh BACKUP_DIR}
live_url=$DATABASE_URL
export PGOPTIONS="-c client_min_messages=warning"  # no NOTICE for a drill database not there
drill_url=${DATABASE_URL%/*}/gamut_drill
media=$(mktemp -d /tmp/gamut-drill.XXXXXX)
trap 'rm -rf "$media"; psql -q "$live_url" -c "DROP DATABASE IF EXISTS gamut_drill"' EXIT
psql -q "$live_url" -c "DROP DATABASE IF EXISTS gamut_drill" -c "CREATE DATABASE gamut_drill"
pg_restore --no-owner --exit-on-error --dbname="$drill_url" "$dir/gamut.dump"
tar -C "$media" -xzf "$dir/media.tar.gz"
export DATABASE_URL="$drill_url" MEDIA_ROOT="$media"
.venv/bin/python manage.py migrate --check >/dev/null || {
  echo "restore drill: the backup's schema is older than the code: migrate after a restore" >&2
}
photos=$(.venv/bin/python manage.py recheck_images --dry-run 2>&1)
echo "$photos"
case "$photos" in
  *", 0 missing") ;;
  *) echo "restore drill FAILED: photos the database names are not in the backup" >&2; exit 1 ;;
esac
echo "restore drill passed: $dir restores, with every photo"
