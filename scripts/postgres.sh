#!/usr/bin/env bash
# A throw-away PostgreSQL server for the tests, from Debian's packages
# (installed when missing): a cluster in DIR, on a free loopback port,
# trusting local connections, without fsync (PG_DURABLE=1: with it).
#
#   scripts/postgres.sh start DIR   initialise DIR (once), start, print the URL
#                                   (a restart keeps the port of the first start;
#                                   a server that runs is left running)
#   scripts/postgres.sh stop DIR    stop the server of DIR
set -euo pipefail
cmd=${1:?usage: postgres.sh start|stop DIR}
dir=$(realpath -m "${2:?usage: postgres.sh start|stop DIR}")

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bin" ]; then
  echo "postgres.sh: installing Debian's postgresql" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 && apt-get install -y -qq postgresql >&2
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi

# initdb and the server refuse to run as root: run them as postgres.
run=()
if [ "$(id -u)" = 0 ]; then
  run=(runuser -u postgres --)
fi

case "$cmd" in
start)
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    "${run[@]}" "$bin/initdb" -D "$dir/data" -U ctxflow --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  # Fast and unsafe by default; PG_DURABLE=1 for a test that crashes the
  # server and expects what was committed to be there.
  durable=off
  [ "${PG_DURABLE:-}" = 1 ] && durable=on
  # A new cluster takes a free port below the kernel's ephemeral range: a
  # port in it may be an outgoing connection's source port by the time the
  # server binds it (after a load test, thousands are). A failed start is
  # tried again on another port; a restart keeps the port of the first.
  if [ -f "$dir/port" ] && "${run[@]}" "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
    echo "postgres://ctxflow@127.0.0.1:$(cat "$dir/port")/postgres?sslmode=disable" # running: as it is
    exit 0
  fi
  low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  [ "$low" -gt 11000 ] || low=32768
  for attempt in 1 2 3 4 5; do
    if [ -f "$dir/port" ]; then # started before: the same address again
      port=$(cat "$dir/port")
      attempt=5
    else
      for _ in $(seq 50); do
        port=$((10000 + RANDOM % (low - 10000)))
        (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null || break
      done
    fi
    if "${run[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=$durable -c synchronous_commit=$durable -c max_connections=200" >/dev/null; then
      echo "$port" >"$dir/port"
      echo "postgres://ctxflow@127.0.0.1:$port/postgres?sslmode=disable"
      exit 0
    fi
    [ "$attempt" -lt 5 ] || { cat "$dir/server.log" >&2; exit 1; }
  done
  ;;
stop)
  "${run[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  ;;
*)
  echo "usage: postgres.sh start|stop DIR" >&2
  exit 2
  ;;
esac
