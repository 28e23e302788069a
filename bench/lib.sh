# Shared by the benchmark scripts that run gunicorn on a throwaway PostgreSQL (sourced, never
# run). The sourcing script sets PG_PORT, PG_DIR and, once started, DATABASE_URL and
# gunicorn_pid.

gunicorn_pid=""

# cleanup: stop gunicorn (TERM, then KILL after 10 s) and the PostgreSQL (unless KEEP_PG=1).
cleanup() {
  if [ -n "$gunicorn_pid" ] && kill -0 "$gunicorn_pid" 2>/dev/null; then
    kill -TERM "$gunicorn_pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$gunicorn_pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$gunicorn_pid" 2>/dev/null || true
  fi
  if [ "${KEEP_PG:-0}" = 1 ]; then
    echo "PostgreSQL left running: $DATABASE_URL (stop: .ci/postgres.sh stop $PG_PORT $PG_DIR)"
  else
    .ci/postgres.sh stop "$PG_PORT" "$PG_DIR" || true
  fi
}

# cpu_ticks PID: user+system clock ticks of PID, of its live children (gunicorn workers,
# PostgreSQL backends) and of its children that have exited (Django reconnects every 60 s).
cpu_ticks() {
  local total pid
  total=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat" 2>/dev/null || echo 0)
  for pid in $(pgrep -P "$1" || true); do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
  done
  echo "$total"
}
