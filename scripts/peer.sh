#!/usr/bin/env bash
# The peer of `make bench`: LangGraph.js with its SQLite checkpointer running the same six-step turn
# (bench/peer/turn.mjs). Installs what it needs, then runs the benchmark and prints its one JSON object.
#
#   scripts/peer.sh [--short] [--turns N] [--threads T] [--thread-turns M] [--bytes-to K]
#
# - Tools: node (20+; Debian's 18 with a warning), npm, python3, make, g++ and the Node headers; whatever
#   is missing is installed from Debian's packages (nodejs, npm, python3, make, g++, libnode-dev) when
#   running as root, else the script stops and says what is missing.
# - Packages: exactly bench/peer/package-lock.json, from the npm registry, with `npm ci`. better-sqlite3
#   has no reachable prebuilt binary, so it is always compiled from source by node-gyp against the local
#   headers (npm_config_nodedir): nothing is downloaded but registry packages.
# - Cache: ${CTXFLOW_PEER_CACHE:-~/.cache/ctxflow/peer}/<key>, the key a hash of package.json,
#   package-lock.json, the Node version and the machine; a warm run only copies turn.mjs there.
#   Older keys are removed. Nothing is written under bench/peer.
set -euo pipefail

die() {
  echo "peer.sh: $*" >&2
  exit 1
}
say() { echo "peer.sh: $*" >&2; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=$root/bench/peer
for f in package.json package-lock.json turn.mjs; do
  [ -f "$src/$f" ] || die "missing $src/$f"
done

# @langchain/core 1.4 and better-sqlite3 12 declare Node >= 20. Debian bookworm's nodejs is 18: there
# better-sqlite3 12 still compiles and loads, and @langchain/core runs once Web Crypto is global (a flag on
# 18), so 18 is accepted with that flag and a warning; the JSON's versions.node tells which one ran.
MIN_NODE=18
node_flags=()

# --- tools -------------------------------------------------------------------------------------------
apt_updated=
apt_install() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    die "missing: $*; install these Debian packages (as root: apt-get install $*) and run again"
  fi
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "$apt_updated" ]; then
    say "apt-get update"
    apt-get update -qq >&2 || die "apt-get update failed"
    apt_updated=1
  fi
  say "installing Debian packages: $*"
  apt-get install -y -qq --no-install-recommends "$@" >&2 || die "apt-get install $* failed"
}

pkgs=()
command -v node >/dev/null || pkgs+=(nodejs)
command -v npm >/dev/null || pkgs+=(npm)
command -v python3 >/dev/null || pkgs+=(python3)
command -v make >/dev/null || pkgs+=(make)
command -v g++ >/dev/null || pkgs+=(g++)
[ ${#pkgs[@]} -eq 0 ] || apt_install "${pkgs[@]}"

node_version=$(node -p 'process.versions.node') || die "node does not run"
[ "${node_version%%.*}" -ge "$MIN_NODE" ] ||
  die "Node $node_version at $(command -v node) is too old: the pinned packages need Node >= $MIN_NODE"
if [ "${node_version%%.*}" -lt 20 ]; then
  say "warning: Node $node_version is older than the Node 20 that @langchain/core 1.4 declares;" \
    "running with --experimental-global-webcrypto (its numbers are not comparable with a Node 20+ run)"
  node_flags=(--experimental-global-webcrypto)
fi

# The headers node-gyp compiles against: those of the running node, never a download.
# nodesource's nodejs ships them in <prefix>/include/node; Debian's nodejs has them in libnode-dev.
headers_ok() { [ -f "$1/include/node/node.h" ] && [ -f "$1/include/node/common.gypi" ]; }
headers_version() {
  sed -n 's/^#define NODE_\(MAJOR\|MINOR\|PATCH\)_VERSION \([0-9]*\).*/\2/p' "$1/include/node/node_version.h" | paste -sd.
}
nodedir=${npm_config_nodedir:-$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")}
if ! headers_ok "$nodedir"; then
  if dpkg-query -W -f='${Version}' nodejs 2>/dev/null | grep -q dfsg; then
    apt_install libnode-dev # Debian's own nodejs: its headers package
    nodedir=/usr
  fi
  headers_ok "$nodedir" ||
    die "no Node headers for node $node_version under $nodedir/include/node (node.h, common.gypi);" \
      "install the headers of this exact Node build and set npm_config_nodedir to their prefix"
fi
hv=$(headers_version "$nodedir")
[ "$hv" = "$node_version" ] ||
  die "the headers in $nodedir/include/node are for Node $hv, but node is $node_version: better-sqlite3 would not load"

# --- install (cached) ----------------------------------------------------------------------------------
cache_root=${CTXFLOW_PEER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ctxflow/peer}
key=$(cat "$src/package.json" "$src/package-lock.json" <(node -p 'process.version + " " + process.versions.modules + " " + process.arch + " " + process.platform') |
  sha256sum | cut -c1-16)
dir=$cache_root/$key
mkdir -p "$cache_root"

verify() { # the compiled module loads in this node and opens a database
  (cd "$1" && node -e 'const D = require("better-sqlite3"); new D(":memory:").prepare("SELECT 1").get()') 2>&1
}

if [ ! -f "$dir/.installed" ]; then
  exec 9>"$cache_root/.lock"
  flock 9 # one install at a time; a second caller waits and then finds it done
  if [ ! -f "$dir/.installed" ]; then
    say "installing the peer's packages into $dir (better-sqlite3 compiles from source: about 1–2 minutes)"
    started=$(date +%s)
    tmp=$(mktemp -d "$cache_root/.tmp.XXXXXX")
    chmod 755 "$tmp"
    trap 'rm -rf "$tmp"' EXIT
    cp "$src/package.json" "$src/package-lock.json" "$tmp/"
    if ! (cd "$tmp" &&
      npm_config_nodedir=$nodedir \
        npm_config_build_from_source=true \
        npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false \
        npm ci --foreground-scripts --no-progress) >"$tmp/install.log" 2>&1; then
      tail -n 40 "$tmp/install.log" >&2
      die "npm ci failed (log above; nodedir=$nodedir, node $node_version, npm $(npm --version))"
    fi
    [ -f "$tmp/node_modules/better-sqlite3/build/Release/better_sqlite3.node" ] || {
      tail -n 40 "$tmp/install.log" >&2
      die "npm ci finished but better-sqlite3 was not compiled (were its install scripts skipped?)"
    }
    out=$(verify "$tmp") || die "better-sqlite3 does not load in node $node_version: $out"
    rm -rf "$dir"
    mv "$tmp" "$dir"
    trap - EXIT
    touch "$dir/.installed"
    say "installed in $(($(date +%s) - started)) s"
    for old in "$cache_root"/*; do # keep only the current key (and touch nothing but keys)
      if [[ $(basename "$old") =~ ^[0-9a-f]{16}$ ]] && [ "$old" != "$dir" ]; then rm -rf "$old"; fi
    done
  fi
  flock -u 9
fi

# --- run ------------------------------------------------------------------------------------------------
cp "$src/turn.mjs" "$dir/.turn.mjs.$$" && mv -f "$dir/.turn.mjs.$$" "$dir/turn.mjs"
LANGSMITH_TRACING=false LANGCHAIN_TRACING_V2=false exec node "${node_flags[@]}" "$dir/turn.mjs" "$@"
