#!/bin/sh
# manage.py with the settings of .env, as the systemd units read them (EnvironmentFile):
#   sudo -u gamut deploy/manage.sh migrate --noinput
# GAMUT_DOTENV names another file of settings (default: .env beside manage.py); not a NAME_FILE
# variable, which settings.py reads as the value of the setting NAME (GAMUT_ENV_FILE would be).
set -eu
cd "$(dirname "$0")/.."
set -a
. "${GAMUT_DOTENV:-./.env}"
set +a
exec .venv/bin/python manage.py "$@"
