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

# busy_ticks: the whole machine's busy and stolen clock ticks, from /proc/stat.
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9, $9}' /proc/stat; }

# run_measured SUMMARY WHAT CMD...: run the load client CMD (which writes the JSON SUMMARY with
# its own client_cpu_seconds), then print the CPU-seconds that gunicorn, PostgreSQL, the client
# and everything else used over its run (WHAT names the run's phases), and the host's speed
# (bench/host_speed.py) just before and after it. Returns CMD's status.
run_measured() {
  local summary=$1 what=$2 postmaster gu0 pg0 busy0 steal0 t0 t1 gu1 pg1 busy1 steal1 client
  local status=0
  shift 2
  postmaster=$(head -1 "$PG_DIR/postmaster.pid")
  local speed0 speed1
  speed0=$($PY bench/host_speed.py)
  gu0=$(cpu_ticks "$gunicorn_pid"); pg0=$(cpu_ticks "$postmaster"); read -r busy0 steal0 < <(busy_ticks)
  t0=$(date +%s.%N)
  "$@" || status=$?
  t1=$(date +%s.%N)
  gu1=$(cpu_ticks "$gunicorn_pid"); pg1=$(cpu_ticks "$postmaster"); read -r busy1 steal1 < <(busy_ticks)
  speed1=$($PY bench/host_speed.py)
  client=$($PY -c 'import json, sys; print(json.load(open(sys.argv[1])).get("client_cpu_seconds", 0))' \
    "$summary" 2>/dev/null || echo 0)
  # The rest of the busy time is other processes (and the load client's database checks): if
  # it is large, something else was running and the figures are not representative.
  awk -v g=$((gu1 - gu0)) -v p=$((pg1 - pg0)) -v b=$((busy1 - busy0)) -v st=$((steal1 - steal0)) \
      -v c="$client" -v hz="$(getconf CLK_TCK)" -v n="$(nproc)" -v t0="$t0" -v t1="$t1" \
      -v what="$what" 'BEGIN {
    w = t1 - t0
    printf "CPU-seconds over the %.0f s of %s (%d cores: %.0f available): gunicorn %.1f, PostgreSQL %.1f, load client %.1f, everything else %.1f (stolen by the host %.1f)\n",
           w, what, n, n * w, g / hz, p / hz, c, b / hz - g / hz - p / hz - c, st / hz
    if (b / hz - g / hz - p / hz - c > 5)
      print "More than 5 CPU-s went to other processes: discard this run and run it again when the machine is quiet." }'
  echo "Host speed (bench/host_speed.py, lower is faster): $speed0 before the load, $speed1 after"
  return "$status"
}
