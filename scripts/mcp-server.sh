#!/usr/bin/env bash
# Installs (once) and runs a real MCP server for ctxflow's end-to-end tests
# (issue 25, item 2): @modelcontextprotocol/server-everything, pinned with
# its whole dependency tree by scripts/mcp/package-lock.json.
#
#   scripts/mcp-server.sh [install]   install unless a working copy is cached;
#                                     print the command that runs the server
#                                     on stdout (append `stdio`, or
#                                     `streamableHttp` with PORT set)
#   scripts/mcp-server.sh path        print the install directory and exit
#   scripts/mcp-server.sh serve [PORT]
#                                     install, then serve streamable HTTP in
#                                     the foreground at
#                                     http://127.0.0.1:PORT/mcp (default 3001)
#
# For example, a worker whose agent has the server's tools:
#   CTXFLOW_MCP_SERVERS="everything=stdio:$(scripts/mcp-server.sh) stdio" ctxflow dev
#
# The copy is installed with `npm ci` outside the clone, in a directory named
# by the lock file's hash, so fresh clones (CI) reuse it and a new pin
# installs anew:
#   ${CTXFLOW_MCP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ctxflow/mcp/<hash>}
# Concurrent callers are serialised by a lock file. Progress goes to stderr;
# stdout carries only the command (or the path).
#
# Needs: node (20 or later) and npm; the npm registry on a cold install only.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
pins=$here/mcp
cache_root=${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}
hash=$(cat "$pins/package.json" "$pins/package-lock.json" | sha256sum | cut -c1-12)
DIR=${CTXFLOW_MCP_DIR:-$cache_root/ctxflow/mcp/$hash}
ENTRY=$DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js

log() { printf '[mcp-server] %s\n' "$*" >&2; }
die() { printf 'mcp-server: error: %s\n' "$*" >&2; exit 1; }

# works reports whether the cached server starts: over stdio it answers an
# initialize request.
works() {
  [ -f "$ENTRY" ] && [ -f "$DIR/.installed" ] || return 1
  local out
  out=$(printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"check","version":"1"}}}' |
    timeout 20 node "$ENTRY" stdio 2>/dev/null | head -n1) || true
  grep -q '"serverInfo"' <<<"$out"
}

install() {
  if works; then
    log "cached: $DIR"
    return
  fi
  command -v node >/dev/null 2>&1 || die "'node' is not on PATH (Node.js 20 or later runs the MCP server)"
  command -v npm >/dev/null 2>&1 || die "'npm' is not on PATH (it installs the pinned MCP server)"
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$major" -ge 20 ] || die "node $(node --version) is too old: the MCP server needs 20 or later"
  mkdir -p "$DIR"
  exec 9>"$DIR.lock"
  flock 9
  if works; then # another caller installed it meanwhile
    log "cached: $DIR"
    return
  fi
  log "installing the pinned MCP server into $DIR"
  rm -f "$DIR/.installed"
  cp "$pins/package.json" "$pins/package-lock.json" "$DIR/"
  (cd "$DIR" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2) || die "npm ci failed in $DIR"
  touch "$DIR/.installed"
  works || die "the installed server does not answer an initialize request over stdio ($ENTRY)"
  log "installed"
}

case ${1:-install} in
  install)
    install
    echo "node $ENTRY"
    ;;
  path)
    echo "$DIR"
    ;;
  serve)
    install
    port=${2:-3001}
    log "serving streamable HTTP at http://127.0.0.1:$port/mcp"
    PORT=$port exec node "$ENTRY" streamableHttp
    ;;
  *)
    die "unknown command '$1' (install, path or serve)"
    ;;
esac
