#!/bin/sh
# Restore a backup of deploy/backup.sh over the live database and photos (docs/operations.md, "Backups").
# Stop the web, the worker and beat first, migrate after (the code may be newer than the
# backup), then start them again:
#   systemctl stop gamut-web gamut-worker gamut-beat
#   sudo -u gamut deploy/restore.sh /var/backups/gamut/YYYY-MM-DD
#   sudo -u gamut deploy/manage.sh migrate --noinput
#   systemctl start gamut-web gamut-worker gamut-beat
# The photos there now are moved aside (MEDIA_ROOT.before-restore-TIME), not deleted.
set -eu
cd "$(dirname "$0")/.."
set -a
. "${GAMUT_DOTENV:-./.env}"
set +a
dir=${1:?usage: deploy/restore.sh BACKUP_DIR}
media=${MEDIA_ROOT:-${GAMUT_VAR_DIR:-var}/media}
pg_restore --clean --if-exists --no-owner --exit-on-error --dbname="$DATABASE_URL" "$dir/gamut.dump"
if [ -d "$media" ]; then
  mv "$media" "$media.before-restore-$(date +%Y%m%d-%H%M%S)"
fi
mkdir -p "$media"
tar -C "$media" -xzf "$dir/media.tar.gz"
echo "restored $dir: the database and $(find "$media" -type f | wc -l) photo file(s)"
