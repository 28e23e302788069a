#!/usr/bin/env bash
# The API contract: run schemathesis against /api/schema/ as admin, annotator and anonymous (the
# audits as adjudicator and reviser too), and fail on any 5xx or conformance failure (status
# code, content type, headers, response schema).
# Usage: .ci/schemathesis.sh   (DATABASE_URL: the database to use; default a throwaway SQLite)
#   ST_MAX_EXAMPLES  examples per operation and phase (default 15: about 2-4 minutes on 2 cores)
#   ST_PORT          loopback port of the app (default 8765)
# The demo data is loaded first, so the endpoints have images, candidates and judges to show.
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
port=${ST_PORT:-8765}
examples=${ST_MAX_EXAMPLES:-15}
work=$(mktemp -d /tmp/gamut-st.XXXXXX)
logs=${ST_LOG_DIR:-$work/logs}  # each role's whole report; set ST_LOG_DIR to keep them
mkdir -p "$logs"
# A Redis of its own, as in production: launching a job sends its chunks to the broker.
redis_port=${ST_REDIS_PORT:-6391}
export GAMUT_VAR_DIR="$work/var" DEBUG=False REDIS_URL="redis://127.0.0.1:$redis_port/0" \
  LOG_LEVEL=WARNING
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
  >"$work/redis.log" 2>&1 &
redis_pid=$!

server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

$py manage.py migrate -v0
$py manage.py load_demo >/dev/null
# One token per role; the annotator is the demo's alice, the adjudicator carol (the demo draws
# reviews for her to audit), the rubric reviser dave.
tokens=$($py manage.py shell -c "
from django.contrib.auth.models import User
from knox.models import AuthToken
for name in ('admin', 'alice', 'carol', 'dave'):
    print(AuthToken.objects.create(user=User.objects.get(username=name))[1])
" | grep -E "^gamut_[0-9a-f]{64}$")
admin_token=$(echo "$tokens" | sed -n 1p)
alice_token=$(echo "$tokens" | sed -n 2p)
carol_token=$(echo "$tokens" | sed -n 3p)
dave_token=$(echo "$tokens" | sed -n 4p)

$py -m gunicorn gamut_site.wsgi -b "127.0.0.1:$port" -w 2 --threads 2 -t 60 \
  --access-logfile /dev/null --error-logfile "$work/server.log" >>"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 50); do
  curl -fs -o /dev/null "http://127.0.0.1:$port/login/" && break
  sleep 0.2
done
# The schema is for members only: read it once as admin, then test each role against it.
curl -fsS -H "Authorization: Token $admin_token" "http://127.0.0.1:$port/api/schema/?format=json" \
  -o "$work/schema.json"

status=0
run_as() {
  local role=$1; shift
  echo "== schemathesis as $role"
  # The console script, run by this venv's python (its shebang may point elsewhere).
  set +e
  $py .venv/bin/schemathesis run "$work/schema.json" --url "http://127.0.0.1:$port" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance \
    --max-examples "$examples" --seed 9 --no-color --suppress-health-check all \
    --phases examples,coverage,fuzzing "$@" >"$logs/schemathesis-$role.log" 2>&1
  local rc=$?
  set -e
  tail -n 40 "$logs/schemathesis-$role.log"
  [ "$rc" = 0 ] || status=1
}
run_as admin -H "Authorization: Token $admin_token"
run_as annotator -H "Authorization: Token $alice_token"
run_as anonymous
# The audits are the adjudicator's and the reviser's: their operations alone, as them.
run_as adjudicator -H "Authorization: Token $carol_token" --include-path-regex '^/api/audits/'
run_as reviser -H "Authorization: Token $dave_token" --include-path-regex '^/api/audits/'
if grep -q "Traceback\|Internal Server Error" "$work/server.log"; then
  echo "The server logged an error:" >&2
  cat "$work/server.log" >&2
  status=1
fi
exit $status
