#!/usr/bin/env bash
# Leaderboard benchmark, end to end, on SQLite and then on PostgreSQL. For each: a fresh
# database, migrate, generate 14 models x 2 settings x 1,813 questions x 35 checks (about 1.8
# million verdicts, bench/generate_judging_data.py), then time the whole leaderboard against a
# plain Python loop over the verdict rows and check that both agree (bench/leaderboard_bench.py).
# Run by hand from anywhere:  bench/run_leaderboard_bench.sh
#
# Environment (all optional):
#   BENCH_DBS="sqlite postgresql"        which databases, in this order
#   SQLITE_FILE=bench/out/leaderboard-bench.sqlite3   (removed and recreated)
#   PG_PORT=5436  PG_DIR=/tmp/gamut-bench-pg-judging   (5433 and 5439 are others': not those)
#   QUESTIONS=1813 MODELS=14 CHECKS=35 JUDGES=1         (the data's size)
#   REPEAT=5                             warm runs of the leaderboard
#   KEEP_PG=1                            leave PostgreSQL running afterwards (EXPLAIN ANALYZE);
#                                        otherwise it is stopped and its directory removed
# Extra arguments go to bench/leaderboard_bench.py. The exit status is 1 when the two
# computations disagree on either database.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
BENCH_DBS=${BENCH_DBS:-sqlite postgresql}
SQLITE_FILE=${SQLITE_FILE:-$repo/bench/out/leaderboard-bench.sqlite3}
PG_PORT=${PG_PORT:-5436}
PG_DIR=${PG_DIR:-/tmp/gamut-bench-pg-judging}
QUESTIONS=${QUESTIONS:-1813}
MODELS=${MODELS:-14}
CHECKS=${CHECKS:-35}
JUDGES=${JUDGES:-1}
REPEAT=${REPEAT:-5}
HOST=127.0.0.1
PY=.venv/bin/python

for db in $BENCH_DBS; do
  case "$db" in
    sqlite|postgresql) ;;
    *) echo "BENCH_DBS: unknown database '$db' (sqlite, postgresql)" >&2; exit 2 ;;
  esac
done
case "$SQLITE_FILE" in
  /*) ;;
  *) SQLITE_FILE="$repo/$SQLITE_FILE" ;;
esac
case "$SQLITE_FILE" in
  "$repo"/bench/out/*.sqlite3) ;;
  *) echo "SQLITE_FILE must be a .sqlite3 file under bench/out/ (it is removed)." >&2; exit 2 ;;
esac
if [[ " $BENCH_DBS " == *" postgresql "* ]]; then
  if [ "$PG_PORT" = 5433 ] || [ "$PG_PORT" = 5439 ]; then
    echo "PG_PORT $PG_PORT is someone else's PostgreSQL; choose another port." >&2
    exit 2
  fi
  case "$PG_DIR" in
    /tmp/gamut-bench-*) ;;
    *) echo "PG_DIR must be under /tmp/gamut-bench-* (it is emptied)." >&2; exit 2 ;;
  esac
  if (exec 3<>"/dev/tcp/$HOST/$PG_PORT") 2>/dev/null; then
    echo "Something listens on $HOST:$PG_PORT already; stop it or set PG_PORT." >&2
    exit 2
  fi
fi

mkdir -p bench/out
pg_started=0
cleanup() {
  if [ "$pg_started" = 1 ]; then
    if [ "${KEEP_PG:-0}" = 1 ]; then
      echo "PostgreSQL left running: postgres://postgres@$HOST:$PG_PORT/gamut" \
        "(stop: .ci/postgres.sh stop $PG_PORT $PG_DIR)"
    else
      .ci/postgres.sh stop "$PG_PORT" "$PG_DIR" || true
      rm -rf -- "$PG_DIR"  # about 2 GB at full size
    fi
  fi
}
trap cleanup EXIT

export DEBUG=False MEDIA_ROOT="$repo/bench/out/media"
unset REDIS_URL GAMUT_ENV

code=$(git rev-parse --short HEAD 2>/dev/null || echo "not a git checkout")
git diff --quiet HEAD -- . ':!bench' 2>/dev/null || code="$code, with uncommitted changes outside bench/"
echo "== app code: $code"
echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"

status=0
for db in $BENCH_DBS; do
  if [ "$db" = sqlite ]; then
    echo "== SQLite: $SQLITE_FILE (fresh)"
    rm -f -- "$SQLITE_FILE" "$SQLITE_FILE-wal" "$SQLITE_FILE-shm"
    DATABASE_URL="sqlite:///$SQLITE_FILE"
  else
    echo "== PostgreSQL on $HOST:$PG_PORT ($PG_DIR, fresh)"
    .ci/postgres.sh stop "$PG_PORT" "$PG_DIR" >/dev/null 2>&1 || true
    rm -rf -- "$PG_DIR"
    pg_started=1
    DATABASE_URL=$(.ci/postgres.sh start "$PG_PORT" "$PG_DIR")
  fi
  export DATABASE_URL
  echo "== migrate"
  $PY manage.py migrate --noinput >/dev/null
  echo "== generate"
  $PY bench/generate_judging_data.py --questions "$QUESTIONS" --models "$MODELS" \
    --checks "$CHECKS" --judges "$JUDGES"
  echo "== leaderboard against the loop"
  $PY bench/leaderboard_bench.py --repeat "$REPEAT" "$@" || status=1
done
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
