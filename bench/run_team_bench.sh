#!/usr/bin/env bash
# The team benchmark, end to end: 30 annotators and 15 rubric revisers using the pages, each
# pausing 2-10 s (uniform) after every action, against the app as docker-compose runs it:
# gunicorn with deploy/gunicorn.conf.py (its 4 workers, the app preloaded, DEBUG off), a
# PostgreSQL and a Redis (the cache and the sessions), each a throwaway one on loopback. Then
# the review and revision rules are checked in the database, and everything is stopped.
# Run by hand, never by CI:  bench/run_team_bench.sh
#
# Environment (all optional):
#   BENCH_APP=<dir>          serve the app of another checkout (e.g. an older commit in a
#                            worktree with .venv linked): its own migrations and its own
#                            bench generators make the data (same sizes and seeds); the load
#                            client and its checks are this checkout's
#   BENCH_SATURATE=1         no pause at all (--think 0): the capacity, not the target
#   BENCH_SECONDS=120        measured seconds (after the warm-up: 20 s, or 10 s saturated)
#   BENCH_THINK=2-10         seconds of pause after each action, MIN-MAX
#   ANNOTATORS=30 REVISERS=15
#   QUESTIONS=400            rubrics waiting for a human round (generate_rubric_data.py)
#   REVIEWED=6000 OPEN_POOL=6000   (generate_review_data.py)
#   WEB_CONCURRENCY          gunicorn's workers (deploy/gunicorn.conf.py: 4 unless set)
#   PG_PORT=5443  PG_DIR=/tmp/gamut-bench-team-pg  REDIS_PORT=6443  PORT=8043
#   KEEP_PG=1                leave PostgreSQL running afterwards
# Extra arguments go to bench/team_load.py (e.g. --round-edits 4-8).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
APP=$(cd "${BENCH_APP:-$repo}" && pwd)
PG_PORT=${PG_PORT:-5443}
PG_DIR=${PG_DIR:-/tmp/gamut-bench-team-pg}
REDIS_PORT=${REDIS_PORT:-6443}
PORT=${PORT:-8043}
HOST=127.0.0.1
BENCH_SECONDS=${BENCH_SECONDS:-120}
BENCH_THINK=${BENCH_THINK:-2-10}
[ "${BENCH_SATURATE:-0}" = 1 ] && BENCH_THINK=0
ANNOTATORS=${ANNOTATORS:-30}
REVISERS=${REVISERS:-15}
QUESTIONS=${QUESTIONS:-400}
REVIEWED=${REVIEWED:-6000}
OPEN_POOL=${OPEN_POOL:-6000}
PY=$repo/.venv/bin/python       # the load client's (and lib.sh's host_speed)
APP_PY=$APP/.venv/bin/python    # the app's

case "$PG_PORT" in 5433|5434|5436|5437|5438|5439) echo "PG_PORT $PG_PORT is taken by another script or person." >&2; exit 2 ;; esac
case "$PORT" in 8000|8001|8002) echo "PORT $PORT is taken by another script or person." >&2; exit 2 ;; esac
case "$PG_DIR" in
  /tmp/gamut-bench-*) ;;
  *) echo "PG_DIR must be under /tmp/gamut-bench-* (it is emptied)." >&2; exit 2 ;;
esac
[ -x "$APP_PY" ] || { echo "$APP has no .venv (link one: ln -s /work/main/.venv $APP/.venv)" >&2; exit 2; }
.ci/postgres.sh stop "$PG_PORT" "$PG_DIR" >/dev/null 2>&1 || true
for port in "$PORT" "$PG_PORT" "$REDIS_PORT"; do
  if (exec 3<>"/dev/tcp/$HOST/$port") 2>/dev/null; then
    echo "Something listens on $HOST:$port already; stop it first." >&2
    exit 2
  fi
done

mkdir -p bench/out
. bench/lib.sh   # cleanup, run_measured
redis_dir=$(mktemp -d /tmp/gamut-bench-team-redis.XXXXXX)
stop_all() {
  cleanup
  if [ -s "$redis_dir/redis.pid" ]; then kill -TERM "$(cat "$redis_dir/redis.pid")" 2>/dev/null || true; fi
  sleep 0.5
  rm -rf -- "$redis_dir"
}

code=$(git -C "$APP" rev-parse --short HEAD 2>/dev/null || echo "not a git checkout")
git -C "$APP" diff --quiet HEAD -- . ':!bench' 2>/dev/null || code="$code, with uncommitted changes outside bench/"
echo "== app: $APP ($code); load client: $(git rev-parse --short HEAD)"
echo "== uptime: $(uptime)"
echo "== PostgreSQL on $HOST:$PG_PORT ($PG_DIR, fresh), Redis on $HOST:$REDIS_PORT"
rm -rf -- "$PG_DIR"
DATABASE_URL=$(.ci/postgres.sh start "$PG_PORT" "$PG_DIR")
trap stop_all EXIT
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$redis_dir" --appendonly yes \
  --save '' --daemonize yes --pidfile "$redis_dir/redis.pid" --logfile "$redis_dir/redis.log"
# As compose gives the web container (GAMUT_ENV=production aside: its secure cookies and HTTPS
# redirect need the TLS proxy in front; DEBUG is off as production has it).
export DATABASE_URL REDIS_URL="redis://$HOST:$REDIS_PORT/0" DEBUG=False ALLOWED_HOSTS=$HOST
export SECRET_KEY="bench-team-$(date +%s)-not-a-secret-but-long-enough-for-the-check-xxxxxxxx"
export MEDIA_ROOT="$repo/bench/out/media"
unset GAMUT_ENV

echo "== migrate and generate (with $APP's bench generators)"
(cd "$APP" && $APP_PY manage.py migrate --noinput >/dev/null)
(cd "$APP" && $APP_PY bench/generate_review_data.py --reset --reviewed "$REVIEWED" \
  --open-pool "$OPEN_POOL" --tokens "$repo/bench/out/tokens.json" | tr -d '\n' | cut -c1-300; echo)
(cd "$APP" && $APP_PY bench/generate_rubric_data.py --questions "$QUESTIONS" --revisers "$REVISERS" \
  --credentials "$repo/bench/out/revisers.json" | tail -3)
# The annotators log in through the page like everyone: they get the revisers' password (its
# hash copied; the generator leaves them without a usable one).
psql -q "$DATABASE_URL" -c "UPDATE auth_user SET password = (SELECT password FROM auth_user
  WHERE username = 'bench-reviser-01') WHERE username LIKE 'bench-annotator-%'"
psql -q "$DATABASE_URL" -c "VACUUM ANALYZE" 2>/dev/null

workers=${WEB_CONCURRENCY:-4}
stamp=$(date +%Y%m%d-%H%M%S)
echo "== gunicorn -c deploy/gunicorn.conf.py ($workers workers) on $HOST:$PORT"
(cd "$APP" && exec "$APP/.venv/bin/gunicorn" -c deploy/gunicorn.conf.py -b "$HOST:$PORT" \
  gamut_site.wsgi >"$repo/bench/out/team_load-$stamp-access.log" 2>"$repo/bench/out/gunicorn-team.log") &
gunicorn_pid=$!
ready=0
# The app is imported once, before the workers fork: on a busy machine that takes a while.
for _ in $(seq 1 600); do
  if (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; then ready=1; break; fi
  kill -0 "$gunicorn_pid" 2>/dev/null || break
  sleep 0.2
done
if [ "$ready" != 1 ]; then echo "gunicorn did not start; see bench/out/gunicorn-team.log" >&2; exit 1; fi
sleep 2  # every worker forked
summary=bench/out/team_load-$stamp.json
echo "== load (uptime: $(uptime | sed 's/.*load/load/'))"
status=0
run_measured "$summary" "logins, load and checks" \
  $PY bench/team_load.py --url "http://$HOST:$PORT" --annotators "$ANNOTATORS" \
  --revisers "$REVISERS" --seconds "$BENCH_SECONDS" --think "$BENCH_THINK" --workers "$workers" \
  --gunicorn-pid "$gunicorn_pid" --postgres-pid "$(head -1 "$PG_DIR/postmaster.pid")" \
  --out "$summary" "$@" || status=$?
echo "== uptime: $(uptime)"
exit "$status"
