#!/usr/bin/env bash
# Builds (once) and serves a real, CPU-only Ollama server for ctxflow's
# integration tests (docs/architecture.md §11, issue 4 item 5).
#
#   scripts/ollama-test-server.sh [build]   build the binary unless a working one
#                                           is cached; print its path on stdout
#   scripts/ollama-test-server.sh path      print where the binary lives (built
#                                           or not) and exit
#   scripts/ollama-test-server.sh serve [PORT]
#                                           build, then run `ollama serve` in the
#                                           foreground on 127.0.0.1:PORT (default
#                                           11435) with throw-away OLLAMA_MODELS
#                                           and HOME, for manual checks
#
# Why a build script: the Go module proxy serves github.com/ollama/ollama
# v0.17.4, but its module zip omits llama/llama.cpp/vendor/ (nlohmann/json.hpp,
# nlohmann/json_fwd.hpp, stb/stb_image.h, miniaudio/miniaudio.h), so a plain
# `go install` fails. The headers come from a registry package instead: the npm
# package node-llama-cpp 3.22.1 ships llama/gitRelease.bundle, a git bundle of
# llama.cpp whose vendor/ holds all four.
#
# The binary is cached outside the clone so that fresh clones (CI) reuse it:
#   ${CTXFLOW_OLLAMA_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/ctxflow/ollama-v0.17.4/ollama}
# A cold build takes about 5-9 minutes on 2 cores. Concurrent callers are
# serialised by a lock file next to the binary; all but the first find the
# binary built. Progress and timings go to stderr; stdout carries only the
# binary's path.
#
# Needs: go (with cgo and a C/C++ compiler), npm, git, tar; network access to
# the Go module proxy and the npm registry on a cold build only.
set -euo pipefail

OLLAMA_VERSION=0.17.4
OLLAMA_MODULE=github.com/ollama/ollama
NODE_LLAMA_CPP=node-llama-cpp@3.22.1
VENDOR_HEADERS=(nlohmann/json.hpp nlohmann/json_fwd.hpp stb/stb_image.h miniaudio/miniaudio.h)

cache_root=${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}
BIN=${CTXFLOW_OLLAMA_BIN:-$cache_root/ctxflow/ollama-v$OLLAMA_VERSION/ollama}

start=$(date +%s)
log() { printf '[ollama-test-server +%ss] %s\n' "$(($(date +%s) - start))" "$*" >&2; }
die() { printf 'ollama-test-server: error: %s\n' "$*" >&2; exit 1; }

need() {
  local c
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 || die "'$c' is not on PATH; it is needed to build Ollama $OLLAMA_VERSION ($(why "$c"))"
  done
}
why() {
  case $1 in
    go) echo "to download and compile the Ollama module" ;;
    npm) echo "to fetch $NODE_LLAMA_CPP, which carries llama.cpp's vendor headers" ;;
    git) echo "to unpack llama.cpp from node-llama-cpp's git bundle" ;;
    tar) echo "to unpack the npm tarball" ;;
    gcc | g++) echo "cgo compiles llama.cpp and ggml" ;;
    *) echo "build tool" ;;
  esac
}

# works reports whether $BIN is an Ollama $OLLAMA_VERSION binary that runs.
# `ollama --version` also asks a server for its version; port 1 refuses at once.
works() {
  [ -x "$BIN" ] || return 1
  local out
  out=$(OLLAMA_HOST=127.0.0.1:1 "$BIN" --version 2>&1) || return 1
  grep -q "client version is $OLLAMA_VERSION" <<<"$out"
}

build() {
  if works; then
    log "cached: $BIN"
    echo "$BIN"
    return
  fi
  mkdir -p "$(dirname "$BIN")"
  exec 9>"$BIN.lock"
  if ! flock -n 9 2>/dev/null; then
    log "another build holds $BIN.lock; waiting for it"
    flock 9
  fi
  if works; then # built by whoever held the lock
    log "cached: $BIN"
    echo "$BIN"
    return
  fi

  need go npm git tar gcc g++
  [ "$(go env CGO_ENABLED)" = 1 ] || die "cgo is disabled (go env CGO_ENABLED=$(go env CGO_ENABLED)); Ollama's llama.cpp backend needs it"

  local tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/ctxflow-ollama-build.XXXXXX")
  # shellcheck disable=SC2064
  trap "chmod -R u+w '$tmp' 2>/dev/null; rm -rf '$tmp'" EXIT
  log "building Ollama $OLLAMA_VERSION CPU-only into $BIN (work dir $tmp)"

  # 1. The module source, from the Go module proxy. Run outside any module so
  #    that no go.mod or go.sum is touched.
  local t0 dl dir
  t0=$(date +%s)
  dl=$(cd "$tmp" && GO111MODULE=on GOWORK=off go mod download -json "$OLLAMA_MODULE@v$OLLAMA_VERSION") ||
    die "go mod download $OLLAMA_MODULE@v$OLLAMA_VERSION failed: $dl"
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$dl")
  [ -n "$dir" ] && [ -f "$dir/go.mod" ] || die "go mod download gave no source directory for $OLLAMA_MODULE@v$OLLAMA_VERSION: $dl"
  cp -R "$dir" "$tmp/ollama"
  chmod -R u+w "$tmp/ollama"
  log "module source: $dir ($(($(date +%s) - t0))s)"

  # 2. llama.cpp's vendor headers, from the npm registry.
  t0=$(date +%s)
  mkdir "$tmp/npm"
  local tgz
  tgz=$(cd "$tmp/npm" && npm pack --silent "$NODE_LLAMA_CPP" 2>"$tmp/npm/err" | tail -n 1) ||
    die "npm pack $NODE_LLAMA_CPP failed: $(cat "$tmp/npm/err")"
  [ -f "$tmp/npm/$tgz" ] || die "npm pack $NODE_LLAMA_CPP produced no tarball: $(cat "$tmp/npm/err")"
  tar -xzf "$tmp/npm/$tgz" -C "$tmp/npm" package/llama/gitRelease.bundle ||
    die "$NODE_LLAMA_CPP has no llama/gitRelease.bundle (the git bundle of llama.cpp that holds vendor/)"
  log "fetched $NODE_LLAMA_CPP ($(($(date +%s) - t0))s)"

  t0=$(date +%s)
  git clone --quiet --no-checkout "$tmp/npm/package/llama/gitRelease.bundle" "$tmp/llama.cpp" 2>"$tmp/git.err" ||
    die "git clone of $NODE_LLAMA_CPP's llama/gitRelease.bundle failed: $(cat "$tmp/git.err")"
  # Prefer the llama.cpp commit Ollama vendors (Makefile.sync FETCH_HEAD); the
  # bundle is a shallow release, so fall back to its own head.
  local want rev
  want=$(sed -n 's/^FETCH_HEAD=//p' "$tmp/ollama/Makefile.sync")
  if [ -n "$want" ] && git -C "$tmp/llama.cpp" cat-file -e "$want^{commit}" 2>/dev/null; then
    rev=$want
  else
    rev=$(git -C "$tmp/llama.cpp" for-each-ref --format='%(objectname)' --count=1 refs/) ||
      die "the llama.cpp bundle in $NODE_LLAMA_CPP has no refs"
    [ -n "$rev" ] || rev=HEAD
  fi
  git -C "$tmp/llama.cpp" -c advice.detachedHead=false checkout --quiet "$rev" -- vendor 2>"$tmp/git.err" ||
    die "could not check out vendor/ of llama.cpp $rev from the bundle: $(cat "$tmp/git.err")"
  local h missing=()
  for h in "${VENDOR_HEADERS[@]}"; do
    if [ -f "$tmp/llama.cpp/vendor/$h" ]; then
      mkdir -p "$tmp/ollama/llama/llama.cpp/vendor/$(dirname "$h")"
      cp "$tmp/llama.cpp/vendor/$h" "$tmp/ollama/llama/llama.cpp/vendor/$h"
    else
      missing+=("vendor/$h")
    fi
  done
  [ ${#missing[@]} -eq 0 ] ||
    die "the llama.cpp bundle of $NODE_LLAMA_CPP (commit $rev) lacks ${missing[*]}; no other registry source is known"
  log "vendor headers from llama.cpp $(git -C "$tmp/llama.cpp" rev-parse --short "$rev") (Ollama pins ${want:-?}): ${VENDOR_HEADERS[*]} ($(($(date +%s) - t0))s)"

  # 3. CPU-only build: a plain cgo build compiles ggml's CPU backend; the GPU
  #    backends need CMake and are left out.
  t0=$(date +%s)
  log "go build -trimpath (cgo; the slow part: ~5-9 min cold on 2 cores)"
  (cd "$tmp/ollama" && CGO_ENABLED=1 GOFLAGS=-buildvcs=false go build -trimpath \
    -ldflags "-s -w -X $OLLAMA_MODULE/version.Version=$OLLAMA_VERSION" -o "$BIN.new" .) ||
    die "go build of Ollama $OLLAMA_VERSION failed (see the compiler output above)"
  mv -f "$BIN.new" "$BIN"
  works || die "the freshly built $BIN does not run or does not report version $OLLAMA_VERSION: $(OLLAMA_HOST=127.0.0.1:1 "$BIN" --version 2>&1)"
  log "built $BIN ($(($(date +%s) - t0))s compile, $(($(date +%s) - start))s in all)"
  echo "$BIN"
}

serve() {
  local port=${1:-11435} bin home
  bin=$(build)
  home=$(mktemp -d "${TMPDIR:-/tmp}/ctxflow-ollama-serve.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf '$home'" EXIT
  mkdir -p "$home/models"
  log "serving on http://127.0.0.1:$port (OLLAMA_MODELS=$home/models, HOME=$home); Ctrl-C stops"
  HOME=$home OLLAMA_MODELS=$home/models OLLAMA_HOST=127.0.0.1:$port OLLAMA_NOPRUNE=1 "$bin" serve
}

case ${1:-build} in
  build) build ;;
  path) echo "$BIN" ;;
  serve) shift; serve "$@" ;;
  -h | --help | help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
  *) die "unknown command '$1' (want build, path or serve)" ;;
esac
