#!/usr/bin/env bash
# Rubric workspace benchmark, end to end: a throwaway PostgreSQL on 127.0.0.1:5438 (its own
# data directory, /tmp/gamut-bench-pg2), migrate, generate 200 rubrics of 60 checks and 10
# revisers, gunicorn on 127.0.0.1:8002 (DEBUG=False), 10 revisers for 60 s, then stop gunicorn
# and PostgreSQL. Run by hand from anywhere:  bench/run_workspace_bench.sh
#
# Environment (all optional):
#   PG_PORT=5438  PG_DIR=/tmp/gamut-bench-pg2  (5433 and 5439 are other people's PostgreSQL
#                                               and are refused; the review benchmark uses 5434,
#                                               the leaderboard one 5436, llm_throughput 5437)
#   BENCH_USERS=10  BENCH_SECONDS=60  BENCH_THINK=0
#   QUESTIONS=200  CHECKS=60                   (data size: see bench/generate_rubric_data.py)
#   GUNICORN_ARGS="--workers 3"
#   KEEP_PG=1                                  leave PostgreSQL running afterwards (EXPLAIN)
# Extra arguments go to bench/workspace_load.py (e.g. --edits-per-get 5).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
PG_PORT=${PG_PORT:-5438}
PG_DIR=${PG_DIR:-/tmp/gamut-bench-pg2}
BENCH_USERS=${BENCH_USERS:-10}
BENCH_SECONDS=${BENCH_SECONDS:-60}
BENCH_THINK=${BENCH_THINK:-0}
QUESTIONS=${QUESTIONS:-200}
CHECKS=${CHECKS:-60}
GUNICORN_ARGS=${GUNICORN_ARGS:---workers 3}
HOST=127.0.0.1
PORT=8002
PY=.venv/bin/python

if [ "$PG_PORT" = 5433 ] || [ "$PG_PORT" = 5439 ]; then
  echo "PG_PORT $PG_PORT is someone else's PostgreSQL; choose another port." >&2
  exit 2
fi
case "$PG_DIR" in
  /tmp/gamut-bench-*) ;;
  *) echo "PG_DIR must be under /tmp/gamut-bench-* (it is emptied)." >&2; exit 2 ;;
esac
# Our own PostgreSQL left running (KEEP_PG=1) is stopped first; anything else is refused.
.ci/postgres.sh stop "$PG_PORT" "$PG_DIR" >/dev/null 2>&1 || true
for port in "$PORT" "$PG_PORT"; do
  if (exec 3<>"/dev/tcp/$HOST/$port") 2>/dev/null; then
    echo "Something listens on $HOST:$port already (the review benchmark?); stop it first." >&2
    exit 2
  fi
done

mkdir -p bench/out
# cleanup and cpu_ticks
. bench/lib.sh

code=$(git rev-parse --short HEAD 2>/dev/null || echo "not a git checkout")
git diff --quiet HEAD -- . ':!bench' 2>/dev/null || code="$code, with uncommitted changes outside bench/"
echo "== app code: $code"
echo "== PostgreSQL on $HOST:$PG_PORT ($PG_DIR, fresh)"
rm -rf -- "$PG_DIR"
DATABASE_URL=$(.ci/postgres.sh start "$PG_PORT" "$PG_DIR")
export DATABASE_URL
trap cleanup EXIT
export DEBUG=False ALLOWED_HOSTS=$HOST MEDIA_ROOT="$repo/bench/out/media"
unset REDIS_URL GAMUT_ENV

echo "== migrate"
$PY manage.py migrate --noinput >/dev/null
echo "== generate"
$PY bench/generate_rubric_data.py --reset --questions "$QUESTIONS" --checks "$CHECKS"

echo "== gunicorn $GUNICORN_ARGS on $HOST:$PORT"
.venv/bin/gunicorn gamut_site.wsgi --bind "$HOST:$PORT" $GUNICORN_ARGS \
  --log-level warning --error-logfile bench/out/gunicorn-workspace.log &
gunicorn_pid=$!
ready=0
for _ in $(seq 1 100); do
  if (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; then ready=1; break; fi
  sleep 0.2
done
if [ "$ready" != 1 ]; then
  echo "gunicorn did not start; see bench/out/gunicorn-workspace.log" >&2
  exit 1
fi
sleep 1  # let every worker boot
summary=bench/out/workspace_load-$(date +%Y%m%d-%H%M%S).json
echo "== load"
status=0
run_measured "$summary" "logins, load and checks" \
  $PY bench/workspace_load.py --url "http://$HOST:$PORT" --users "$BENCH_USERS" \
  --seconds "$BENCH_SECONDS" --think "$BENCH_THINK" --out "$summary" "$@" || status=$?
exit "$status"
