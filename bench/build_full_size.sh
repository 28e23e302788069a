#!/usr/bin/env bash
# The full-size databases of issue 24, in one throwaway PostgreSQL: run by hand from anywhere,
#   bench/build_full_size.sh            (about 10 minutes on 2 cores)
# and it prints the two DATABASE_URLs. They cannot be one database: generate_judging_data.py
# refuses final questions it did not make (the leaderboard would count them missing for every
# model), and generate_rubric_data.py refuses a database that has rubrics.
#   gamut_judging  review data (generate_review_data.py) and judging data
#                  (generate_judging_data.py: 1,813 questions, 14 models, both settings,
#                  about 1.8 million verdicts)
#   gamut_rubrics  review data and 1,813 rubrics waiting for their first human round
#                  (generate_rubric_data.py --questions 1813)
# Both get the bench people of bench/walk_pages.py (one account per role, `make_people`).
#
# Environment (all optional):
#   PG_PORT=5448  PG_DIR=/tmp/gamut-bench-full   (never the lead's 5433; the dir is emptied)
#   QUESTIONS=1813                               (both generators)
# The PostgreSQL is left running; stop it with .ci/postgres.sh stop $PG_PORT $PG_DIR.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
PG_PORT=${PG_PORT:-5448}
PG_DIR=${PG_DIR:-/tmp/gamut-bench-full}
QUESTIONS=${QUESTIONS:-1813}
PY=.venv/bin/python

if [ "$PG_PORT" = 5433 ]; then
  echo "PG_PORT 5433 is the lead's PostgreSQL; choose another port." >&2
  exit 2
fi
case "$PG_DIR" in
  /tmp/gamut-bench-*) ;;
  *) echo "PG_DIR must be under /tmp/gamut-bench-* (it is emptied)." >&2; exit 2 ;;
esac
mkdir -p bench/out
export MEDIA_ROOT="$repo/bench/out/media"
unset REDIS_URL GAMUT_ENV

echo "== PostgreSQL on 127.0.0.1:$PG_PORT ($PG_DIR, fresh)"
.ci/postgres.sh stop "$PG_PORT" "$PG_DIR" >/dev/null 2>&1 || true
rm -rf -- "$PG_DIR"
base=$(.ci/postgres.sh start "$PG_PORT" "$PG_DIR")
base=${base%/gamut}
for db in gamut_judging gamut_rubrics; do
  psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc "CREATE DATABASE $db"
done

echo "== gamut_judging: migrate, review data, judging data"
export DATABASE_URL=$base/gamut_judging
$PY manage.py migrate --noinput >/dev/null
$PY bench/generate_review_data.py --reset --tokens bench/out/tokens-judging.json
$PY bench/generate_judging_data.py --questions "$QUESTIONS" --quiet
$PY bench/walk_pages.py --make-people

echo "== gamut_rubrics: migrate, review data, rubric data"
export DATABASE_URL=$base/gamut_rubrics
$PY manage.py migrate --noinput >/dev/null
$PY bench/generate_review_data.py --reset --tokens bench/out/tokens-rubrics.json
$PY bench/generate_rubric_data.py --questions "$QUESTIONS"
$PY bench/walk_pages.py --make-people

echo "DATABASE_URL=$base/gamut_judging"
echo "DATABASE_URL=$base/gamut_rubrics"
