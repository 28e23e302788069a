#!/usr/bin/env bash
# Instructions a request of the rubric workspace costs, counted by valgrind (cachegrind), which
# the host's speed barely moves: the machine's wall-clock figures move by a third from one hour
# to the next, this count by a few per cent (49.7, 50.1 and 52.1 M for the same code; what
# moves it is probably the code that looks at the clock, which runs fifty times slower under
# valgrind). Compare two versions of the code alternately, two runs each.
#
# SQLite (its work is counted too) in /tmp/gamut-instructions-<pid>.sqlite3, 5 rubrics of 60
# checks, then bench/workspace_inprocess.py under cachegrind twice, with --rounds 0 and --rounds
# N (each round: the page, then a text edit, a re-tier and a move); the difference divided by
# the 4N requests is one request of that mix. The data is generated afresh before each run.
# Needs valgrind (apt-get install valgrind); about 2.5 minutes with the default N.
# PYTHONHASHSEED is fixed: with Python's random string hashing the same code's count moved by 6%.
#
#   bench/workspace_instructions.sh [N=10]
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
rounds=${1:-10}
PY=.venv/bin/python
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
case "$rounds" in ''|*[!0-9]*|0) echo "N must be a positive whole number, not '$rounds'" >&2; exit 2 ;; esac

db=/tmp/gamut-instructions-$$.sqlite3
log=/tmp/gamut-instructions-$$.log
trap 'rm -f "$db" "$db"-* "$log" /tmp/gamut-instructions-$$-revisers.json' EXIT
export DATABASE_URL=sqlite:///$db DEBUG=False ALLOWED_HOSTS=testserver PYTHONHASHSEED=0
unset REDIS_URL GAMUT_ENV
$PY manage.py migrate --noinput >/dev/null

# count N: the instructions of a run with N rounds; on a failed run, its output and exit 1.
count() {
  local refs
  $PY bench/generate_rubric_data.py --reset --questions 5 --checks 60 \
    --credentials /tmp/gamut-instructions-$$-revisers.json >/dev/null
  if ! valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
      $PY bench/workspace_inprocess.py --rounds "$1" >"$log" 2>&1; then
    echo "workspace_inprocess.py --rounds $1 failed under valgrind:" >&2
    tail -20 "$log" >&2
    exit 1
  fi
  refs=$(awk '/I *refs/ {gsub(",", "", $NF); print $NF}' "$log")
  [ -n "$refs" ] || { echo "valgrind printed no instruction count (see above)" >&2; tail -5 "$log" >&2; exit 1; }
  echo "$refs"
}

code=$(git rev-parse --short HEAD 2>/dev/null || echo "not a git checkout")
git diff --quiet HEAD -- . ':!bench' 2>/dev/null || code="$code, with uncommitted changes outside bench/"
echo "== app code: $code"
base=$(count 0)
with=$(count "$rounds")
awk -v a="$base" -v b="$with" -v n="$rounds" 'BEGIN {
  printf "%.1f M instructions a request (one page and three edits a round, %d rounds)\n", (b - a) / (4 * n) / 1e6, n }'
