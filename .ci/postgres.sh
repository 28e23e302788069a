#!/usr/bin/env bash
# Start a throwaway PostgreSQL on a loopback port, owned by Debian's `postgres` user (the server
# refuses to run as root). Usage: .ci/postgres.sh start|stop [PORT] [DATADIR]
# Prints the DATABASE_URL to use (database `gamut`, user `postgres`, trust auth on loopback).
set -euo pipefail
action=${1:-start}
port=${2:-5433}
datadir=${3:-/tmp/gamut-pg-$port}
bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case "$action" in
  start)
    if [ ! -s "$datadir/PG_VERSION" ]; then
      mkdir -p "$datadir"
      [ "$(id -u)" = 0 ] && chown postgres:postgres "$datadir"
      as_pg "$bindir/initdb" -D "$datadir" -U postgres --auth=trust -E UTF8 >/dev/null
    fi
    as_pg "$bindir/pg_ctl" -D "$datadir" -l "$datadir/server.log" -w \
      -o "-p $port -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
      start >/dev/null
    psql -h 127.0.0.1 -p "$port" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='gamut'" | grep -q 1 \
      || psql -h 127.0.0.1 -p "$port" -U postgres -qc "CREATE DATABASE gamut"
    echo "postgres://postgres@127.0.0.1:$port/gamut"
    ;;
  stop)
    as_pg "$bindir/pg_ctl" -D "$datadir" -m fast stop >/dev/null || true
    ;;
  *) echo "usage: $0 start|stop [PORT] [DATADIR]" >&2; exit 2 ;;
esac
