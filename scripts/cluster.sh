#!/usr/bin/env bash
# The production topology on this machine, without Docker (`make cluster`):
# PostgreSQL (scripts/postgres.sh) holding Temporal's two databases, their
# schema set up by Temporal's own temporal-sql-tool (pinned in go.mod), and
# the transcripts; a Temporal server on them with its Web UI (`ctxflow
# temporal`); the namespace and the search attributes (`ctxflow register`);
# the transcripts' schema (`ctxflow migrate`); two `ctxflow worker`
# processes and `ctxflow api`.
#
#   scripts/cluster.sh start DIR   start whatever of DIR's cluster is not running
#                                  (again after a crash: the schema is brought up
#                                  to date, the data kept), print its URLs
#   scripts/cluster.sh stop DIR    stop it (SIGTERM, then SIGKILL after 20 s)
#
# DIR holds the databases, each process's log (NAME.log; the previous start's
# in NAME.log.1) and pid (NAME.pid), and the workers' data dirs. Ports, taken
# at the first start and kept: CLUSTER_TEMPORAL_PORT (7233), CLUSTER_UI_PORT
# (8233), CLUSTER_API_PORT (8080). CTXFLOW_BIN is the ctxflow binary (default
# bin/ctxflow, built when missing); the processes see the rest of the
# environment (OLLAMA_HOST, CTXFLOW_MODEL_PROVIDER, ...). The API listens on
# 127.0.0.1 and lets any caller pick a tenant (CTXFLOW_ALLOW_ANONYMOUS).
set -euo pipefail
cmd=${1:?usage: cluster.sh start|stop DIR}
dir=$(realpath -m "${2:?usage: cluster.sh start|stop DIR}")
root=$(cd "$(dirname "$0")/.." && pwd)
procs=(temporal worker-a worker-b api) # started in this order, stopped in the reverse

# running NAME: the process of NAME.pid is alive (not a zombie nobody
# reaped) and a ctxflow process (not another one that took its pid).
running() {
  local pid state
  pid=$(cat "$dir/$1.pid" 2>/dev/null) || return 1
  state=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$pid/status" 2>/dev/null)
  [ -n "$state" ] && [ "$state" != Z ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q ctxflow
}

# launch NAME CMD...: run CMD in its own session, logging to NAME.log,
# unless NAME runs.
launch() {
  local name=$1
  shift
  running "$name" && return 0
  [ -f "$dir/$name.log" ] && mv "$dir/$name.log" "$dir/$name.log.1"
  setsid "$@" >"$dir/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/$name.pid"
}

# await NAME WHAT CHECK...: wait up to 2 minutes for CHECK to succeed while
# NAME runs; on failure, show the end of its log.
await() {
  local name=$1 what=$2
  shift 2
  for _ in $(seq 1200); do
    "$@" >/dev/null 2>&1 && return 0
    running "$name" || break
    sleep 0.1
  done
  echo "cluster.sh: $name did not get $what; the end of $dir/$name.log:" >&2
  tail -n 40 "$dir/$name.log" >&2
  exit 1
}

stop() {
  local name pid i
  for ((i = ${#procs[@]} - 1; i >= 0; i--)); do
    name=${procs[i]}
    running "$name" || continue
    pid=$(cat "$dir/$name.pid")
    kill -TERM "$pid"
    for _ in $(seq 200); do running "$name" || break; sleep 0.1; done
    if running "$name"; then kill -KILL "$pid"; fi
  done
  "$root/scripts/postgres.sh" stop "$dir/postgres"
}

start() {
  local begin=$SECONDS
  if ! command -v curl >/dev/null; then # the API's readiness check
    echo "cluster.sh: installing Debian's curl" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >&2
  fi
  mkdir -p "$dir"
  # As root, PostgreSQL runs as the user postgres: it must reach DIR/postgres.
  [ "$(id -u)" = 0 ] && chmod go+x "$dir"
  if [ ! -f "$dir/ports" ]; then
    echo "temporal=${CLUSTER_TEMPORAL_PORT:-7233} ui=${CLUSTER_UI_PORT:-8233} api=${CLUSTER_API_PORT:-8080}" >"$dir/ports"
  fi
  local temporal ui api
  read -r temporal ui api <<<"$(sed 's/[a-z]*=//g' "$dir/ports")"
  local bin=${CTXFLOW_BIN:-$root/bin/ctxflow}
  if [ ! -x "$bin" ]; then
    (cd "$root" && go build -o "$bin" ./cmd/ctxflow)
  fi

  local pg base
  pg=$("$root/scripts/postgres.sh" start "$dir/postgres") || {
    echo "cluster.sh: PostgreSQL did not start (as root, it runs as the user postgres, who must be able to reach $dir/postgres: each directory above it searchable)" >&2
    exit 1
  }
  base=${pg%%/postgres\?*} # postgres://ctxflow@127.0.0.1:PORT
  local pgport=${base##*:}

  # Temporal's schema, by Temporal's own tool, as compose and Kubernetes set
  # it up (deploy/temporal-schema.sh); the transcripts' database.
  local tool # built once, kept in Go's build cache
  tool=$(cd "$root" && go tool -n go.temporal.io/server/cmd/tools/sql)
  export SQL_HOST=127.0.0.1 SQL_PORT=$pgport SQL_USER=ctxflow
  TEMPORAL_SQL_TOOL=$tool sh "$root/deploy/temporal-schema.sh" >"$dir/schema.log" 2>&1 ||
    { cat "$dir/schema.log" >&2; exit 1; }
  "$tool" --plugin postgres12 --db ctxflow create-database >>"$dir/schema.log" 2>&1 || true # there after the first start

  export TEMPORAL_ADDRESS=127.0.0.1:$temporal CTXFLOW_LOG_LEVEL=${CTXFLOW_LOG_LEVEL:-info}
  CTXFLOW_TEMPORAL_PORT=$temporal CTXFLOW_UI_PORT=$ui launch temporal "$bin" temporal \
    --db "$base/temporal?sslmode=disable" --visibility-db "$base/temporal_visibility?sslmode=disable"
  await temporal "ready" grep -q "^temporal ready" "$dir/temporal.log"
  "$bin" register >"$dir/register.log" 2>&1 || { cat "$dir/register.log" >&2; exit 1; }

  export CTXFLOW_TRANSCRIPT_STORE=postgres DATABASE_URL="$base/ctxflow?sslmode=disable" \
    CTXFLOW_UPLOAD_DIR="$dir/uploads"
  "$bin" migrate >"$dir/migrate.log" 2>&1 || { cat "$dir/migrate.log" >&2; exit 1; }
  local w
  for w in worker-a worker-b; do
    mkdir -p "$dir/$w"
    CTXFLOW_DATA_DIR=$dir/$w launch "$w" "$bin" worker
  done
  CTXFLOW_DATA_DIR=$dir/api CTXFLOW_HTTP_ADDR=127.0.0.1:$api CTXFLOW_ALLOW_ANONYMOUS=true launch api "$bin" api
  for w in worker-a worker-b; do
    await "$w" "started" grep -q "worker started" "$dir/$w.log"
  done
  await api "ready" curl -sf "http://127.0.0.1:$api/readyz"

  cat <<EOF
cluster ready in $((SECONDS - begin))s: $dir
  API:         http://127.0.0.1:$api
  Web:         http://127.0.0.1:$api/?temporalUI=http%3A%2F%2F127.0.0.1%3A$ui
  Temporal UI: http://127.0.0.1:$ui
  Temporal:    127.0.0.1:$temporal (namespace ${TEMPORAL_NAMESPACE:-default})
  PostgreSQL:  $base (databases temporal, temporal_visibility, ctxflow)
  Logs:        $dir/{temporal,worker-a,worker-b,api}.log
EOF
}

case "$cmd" in
start) start ;;
stop) stop ;;
*)
  echo "usage: cluster.sh start|stop DIR" >&2
  exit 2
  ;;
esac
