#!/usr/bin/env bash
# The production deployment as docs/production.md's "Without Docker" sets it up, checked end
# to end: an .env made from .env.example, the deploy steps through deploy/manage.sh, gunicorn,
# a Celery worker and beat started with the ExecStart lines of deploy/systemd/*.service,
# Debian's nginx with deploy/nginx.conf and a self-signed certificate, and the fake LLM server
# (tests/fake_llm.py) as Gemini. .ci/deploy_check.py then drives it through the proxy: a login,
# an import over 1 MB, an LLM job, the refusals and the logs. Last, the backups: deploy/backup.sh,
# the restore drill (deploy/restore_drill.sh), then a lost database and photo folder brought
# back by deploy/restore.sh and checked through the proxy again. On the way, the upload gate:
# a large body from anyone who may not upload is refused before nginx reads it.
# Only what is site-specific in the shipped files is changed: server_name, the certificate,
# the ports and /srv/gamut (this checkout).
# Usage: DATABASE_URL=postgres://.../EMPTY_DATABASE .ci/deploy_check.sh
#   DEPLOY_PORTS  five free loopback ports: web, http, https, redis, fake LLM
#                 (default 8401 8402 8403 6394 8404)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
py=$repo/.venv/bin/python
: "${DATABASE_URL:?set DATABASE_URL to an empty PostgreSQL database}"
read -r web_port http_port https_port redis_port fake_port <<<"${DEPLOY_PORTS:-8401 8402 8403 6394 8404}"
started=$(date +%s)

work=$(mktemp -d /tmp/gamut-deploy.XXXXXX)
chmod 755 "$work"  # nginx's workers (www-data) read the static files and write temp bodies
pids=()       # Redis, the fake LLM server
services=()   # gunicorn, the worker, beat
nginx_conf=""
stop_services() {
  for pid in "${services[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${services[@]}"; do wait "$pid" 2>/dev/null || true; done
  services=()
}
cleanup() {
  local status=$?
  [ -n "$nginx_conf" ] && [ -f "$work/nginx.pid" ] && nginx -c "$nginx_conf" -p "$work" -s quit 2>/dev/null
  stop_services
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$status" != 0 ]; then
    for log in "$work"/*.log; do
      echo "---- $log (last 60 lines)" >&2
      tail -n 60 "$log" >&2
    done
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "== the settings: .env from .env.example"
secret=$($py -c "import secrets; print(secrets.token_urlsafe(50))")
sed -e "s|^SECRET_KEY=.*|SECRET_KEY=$secret|" \
    -e "s|^ALLOWED_HOSTS=.*|ALLOWED_HOSTS=localhost|" \
    -e "s|^DATABASE_URL=.*|DATABASE_URL=$DATABASE_URL|" \
    -e "s|^REDIS_URL=.*|REDIS_URL=redis://127.0.0.1:$redis_port/0|" \
    -e "s|^# GEMINI_API_KEY=.*|GEMINI_API_KEY=fake-gemini-key|" \
    -e "s|^# GEMINI_BASE_URL=.*|GEMINI_BASE_URL=http://127.0.0.1:$fake_port|" \
    -e "s|^# LLM_MODEL_GENERATION=.*|LLM_MODEL_GENERATION=gemini-deploy-check|" \
    -e "s|^# GAMUT_VAR_DIR=.*|GAMUT_VAR_DIR=$work/var|" \
    -e "s|^# MEDIA_ROOT=.*|MEDIA_ROOT=$work/var/media|" \
    -e "s|^# STATIC_ROOT=.*|STATIC_ROOT=$work/var/static|" \
    .env.example >"$work/.env"
export GAMUT_DOTENV=$work/.env  # read by deploy/*.sh
# As systemd's EnvironmentFile does for the units: every line of .env in their environment.
set -a
# shellcheck disable=SC1091
. "$work/.env"
set +a
export PYTHONUNBUFFERED=1

echo "== Redis and the fake Gemini server"
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no >"$work/redis.log" 2>&1 &
pids+=($!)
questions='{"questions": ["What kind of stew is this and how is it traditionally made?", "Where does this dish come from and how has the recipe changed over time?", "What wine would go with this dish, and why does it suit it?"]}'
$py -m tests.fake_llm --port "$fake_port" --text "$questions" >"$work/fake-llm.log" 2>&1 &
pids+=($!)

echo "== the deploy steps: migrate, collectstatic, the documentation, an admin, the model"
deploy/manage.sh migrate --noinput -v 0
deploy/manage.sh collectstatic --noinput -v 0
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --quiet
admin_password=$($py -c "import secrets; print(secrets.token_urlsafe(16))")
DJANGO_SUPERUSER_PASSWORD=$admin_password deploy/manage.sh createsuperuser --noinput \
  --username deploy-admin --email deploy-admin@example.org
deploy/manage.sh shell -c "
from llm.models import LLMModel
LLMModel.objects.create(name='gemini-deploy-check', provider='gemini', model='gemini-2.5-flash')
"
# An annotator (a member who may not upload), and an API token for each person: the upload
# gate is driven by session and by token.
member_password=$($py -c "import secrets; print(secrets.token_urlsafe(16))")
tokens=$(DEPLOY_MEMBER_PASSWORD=$member_password deploy/manage.sh shell -c "
import os
from django.contrib.auth.models import Group, User
from knox.models import AuthToken
member = User.objects.create_user('deploy-annotator', password=os.environ['DEPLOY_MEMBER_PASSWORD'])
member.groups.add(Group.objects.get_or_create(name='annotator')[0])
print('admin-token', AuthToken.objects.create(user=User.objects.get(username='deploy-admin'))[1])
print('member-token', AuthToken.objects.create(user=member)[1])
")
admin_token=$(sed -n 's/^admin-token //p' <<<"$tokens")
member_token=$(sed -n 's/^member-token //p' <<<"$tokens")
[ -n "$admin_token" ] && [ -n "$member_token" ] || { echo "no API tokens: $tokens" >&2; exit 1; }

unit_command() {  # the unit's ExecStart, with /srv/gamut this checkout
  sed -n 's/^ExecStart=//p' "deploy/systemd/$1.service" | sed "s|/srv/gamut|$repo|g"
}
start_services() {
  local began
  began=$(date +%s%N)
  # shellcheck disable=SC2046
  $(unit_command gamut-web) -b "127.0.0.1:$web_port" >>"$work/web.log" 2>&1 &
  services+=($!)
  for _ in $(seq 600); do
    curl -fs -o /dev/null -H "Host: localhost" -H "X-Forwarded-Proto: https" \
      "http://127.0.0.1:$web_port/login/" && break
    sleep 0.1
  done
  curl -fs -o /dev/null -H "Host: localhost" -H "X-Forwarded-Proto: https" \
    "http://127.0.0.1:$web_port/login/" || { echo "the web did not answer in a minute" >&2; exit 1; }
  echo "   the web answered $((($(date +%s%N) - began) / 1000000)) ms after its start"
  # Two worker processes, not four: CI has two cores.
  # shellcheck disable=SC2046
  $(unit_command gamut-worker) --concurrency 2 >>"$work/worker.log" 2>&1 &
  services+=($!)
  # shellcheck disable=SC2046
  $(unit_command gamut-beat | sed "s|$repo/var/|$work/var/|") >>"$work/beat.log" 2>&1 &
  services+=($!)
}
echo "== gunicorn, then the worker and beat, as the systemd units start them"
start_services

echo "== nginx with deploy/nginx.conf and a self-signed certificate"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=localhost" \
  -addext "subjectAltName=DNS:localhost" -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null
mkdir -p "$work/nginx-temp"
sed -e "s|server_name gamut.example.org;|server_name localhost;|" \
    -e "s|/etc/letsencrypt/live/gamut.example.org/fullchain.pem|$work/tls.crt|" \
    -e "s|/etc/letsencrypt/live/gamut.example.org/privkey.pem|$work/tls.key|" \
    -e "s|server 127.0.0.1:8000;|server 127.0.0.1:$web_port;|" \
    -e "s|listen 80;|listen 127.0.0.1:$http_port;|" -e "s|listen \[::\]:80;||" \
    -e "s|listen 443 ssl http2;|listen 127.0.0.1:$https_port ssl http2;|" \
    -e "s|listen \[::\]:443 ssl http2;||" \
    -e "s|root /srv/gamut/var;|root $work/var;|" \
    deploy/nginx.conf >"$work/site.conf"
grep -q "server 127.0.0.1:$web_port;" "$work/site.conf"  # the shipped file still has its values
nginx_user=""
if [ "$(id -u)" = 0 ]; then
  nginx_user="user www-data;"
  chown -R www-data "$work/nginx-temp"
  chmod -R a+rX "$work/var"
fi
cat >"$work/nginx.conf" <<EOF
$nginx_user
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;  # warn: a body buffered to a file is logged
events { worker_connections 256; }
http {
  include /etc/nginx/mime.types;
  access_log $work/nginx-access.log;
  client_body_temp_path $work/nginx-temp/body;
  proxy_temp_path $work/nginx-temp/proxy;
  fastcgi_temp_path $work/nginx-temp/fastcgi;
  uwsgi_temp_path $work/nginx-temp/uwsgi;
  scgi_temp_path $work/nginx-temp/scgi;
  include $work/site.conf;
}
EOF
nginx_conf=$work/nginx.conf
nginx -t -q -c "$nginx_conf" -p "$work"
nginx -c "$nginx_conf" -p "$work"

drive() {
  DEPLOY_WORK=$work DEPLOY_ADMIN_PASSWORD=$admin_password DEPLOY_HTTP_PORT=$http_port \
    DEPLOY_HTTPS_PORT=$https_port DEPLOY_MEMBER_PASSWORD=$member_password \
    DEPLOY_ADMIN_TOKEN=$admin_token DEPLOY_MEMBER_TOKEN=$member_token \
    $py .ci/deploy_check.py "$@"
}
echo "== through the proxy"
drive deploy

echo "== backups: deploy/backup.sh, the restore drill, then a restore after losing both"
deploy/backup.sh "$work/backup"
deploy/restore_drill.sh "$work/backup"
stop_services
# The loss: every table and every photo.
PGOPTIONS="-c client_min_messages=warning" psql -q "$DATABASE_URL" \
  -c "DROP SCHEMA public CASCADE" -c "CREATE SCHEMA public"
rm -rf "$MEDIA_ROOT"
deploy/restore.sh "$work/backup"
deploy/manage.sh migrate --noinput -v 0
start_services
drive restored

echo "== deploy check passed in $(($(date +%s) - started)) s"
