#!/bin/sh
# The backup (docs/operations.md, "Backups"): the database, then the photos, into one folder.
#   sudo -u gamut deploy/backup.sh [DIR]      (default /var/backups/gamut/YYYY-MM-DD)
# Photos live only in MEDIA_ROOT: a database restored without them shows no photos, and jobs
# on those images fail. Both go together, always.
set -eu
cd "$(dirname "$0")/.."
set -a
. "${GAMUT_DOTENV:-./.env}"
set +a
dir=${1:-/var/backups/gamut/$(date +%F)}
media=${MEDIA_ROOT:-${GAMUT_VAR_DIR:-var}/media}
mkdir -p "$dir"
# The database first: a photo newer than the dump is harmless, a row without its photo is not.
pg_dump --format=custom --file="$dir/gamut.dump" "$DATABASE_URL"
tar -C "$media" -czf "$dir/media.tar.gz" .
echo "backed up to $dir: database $(du -h "$dir/gamut.dump" | cut -f1), photos $(du -h "$dir/media.tar.gz" | cut -f1)"
