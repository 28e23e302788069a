#!/usr/bin/env bash
# Stage-1 review benchmark, end to end: a throwaway PostgreSQL on 127.0.0.1:5434, migrate,
# generate the data, gunicorn on 127.0.0.1:8001 (DEBUG=False), 30 annotators for 60 s, then
# stop gunicorn and PostgreSQL. Run by hand from anywhere:  bench/run_review_bench.sh
#
# Environment (all optional):
#   PG_PORT=5434  PG_DIR=/tmp/gamut-bench-pg   (the lead's PostgreSQL uses 5433: not that)
#   BENCH_USERS=30  BENCH_SECONDS=60  BENCH_THINK=0
#   REVIEWED=6000  OPEN_POOL=6000              (data size: see bench/generate_review_data.py)
#   GUNICORN_ARGS="--workers 3"                (the best of those tried on 2 cores, see README)
#   KEEP_PG=1                                  leave PostgreSQL running afterwards (EXPLAIN)
# Extra arguments go to bench/review_load.py (e.g. --think 2).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
PG_PORT=${PG_PORT:-5434}
PG_DIR=${PG_DIR:-/tmp/gamut-bench-pg}
BENCH_USERS=${BENCH_USERS:-30}
BENCH_SECONDS=${BENCH_SECONDS:-60}
BENCH_THINK=${BENCH_THINK:-0}
REVIEWED=${REVIEWED:-6000}
OPEN_POOL=${OPEN_POOL:-6000}
GUNICORN_ARGS=${GUNICORN_ARGS:---workers 3}
HOST=127.0.0.1
PORT=8001
PY=.venv/bin/python

if [ "$PG_PORT" = 5433 ]; then
  echo "PG_PORT 5433 is the lead's PostgreSQL; choose another port." >&2
  exit 2
fi
case "$PG_DIR" in
  /tmp/gamut-bench-*) ;;
  *) echo "PG_DIR must be under /tmp/gamut-bench-* (it is emptied)." >&2; exit 2 ;;
esac
if (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; then
  echo "Something listens on $HOST:$PORT already; stop it first." >&2
  exit 2
fi

mkdir -p bench/out
# cleanup and cpu_ticks
. bench/lib.sh

echo "== PostgreSQL on $HOST:$PG_PORT ($PG_DIR, fresh)"
.ci/postgres.sh stop "$PG_PORT" "$PG_DIR" >/dev/null 2>&1 || true
rm -rf -- "$PG_DIR"
DATABASE_URL=$(.ci/postgres.sh start "$PG_PORT" "$PG_DIR")
export DATABASE_URL
trap cleanup EXIT
export DEBUG=False ALLOWED_HOSTS=$HOST MEDIA_ROOT="$repo/bench/out/media"
unset REDIS_URL GAMUT_ENV

echo "== migrate"
$PY manage.py migrate --noinput >/dev/null
echo "== generate"
$PY bench/generate_review_data.py --reset --reviewed "$REVIEWED" --open-pool "$OPEN_POOL"

echo "== gunicorn $GUNICORN_ARGS on $HOST:$PORT"
.venv/bin/gunicorn gamut_site.wsgi --bind "$HOST:$PORT" $GUNICORN_ARGS \
  --log-level warning --error-logfile bench/out/gunicorn.log &
gunicorn_pid=$!
ready=0
for _ in $(seq 1 100); do
  if (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; then ready=1; break; fi
  sleep 0.2
done
if [ "$ready" != 1 ]; then echo "gunicorn did not start; see bench/out/gunicorn.log" >&2; exit 1; fi
sleep 1  # let every worker boot
summary=bench/out/review_load-$(date +%Y%m%d-%H%M%S).json
echo "== load"
status=0
run_measured "$summary" "load and checks" \
  $PY bench/review_load.py --url "http://$HOST:$PORT" --users "$BENCH_USERS" \
  --seconds "$BENCH_SECONDS" --think "$BENCH_THINK" --out "$summary" "$@" || status=$?
exit "$status"
