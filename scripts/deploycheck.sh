#!/usr/bin/env bash
# Validates deploy/ without Docker or a cluster (make lint):
#   k8s/*.yaml    kubeconform -strict against the JSON schemas of Kubernetes
#                 $K8S_VERSION: known kinds and apiVersions, field names,
#                 types, required fields;
#   compose.yaml  compose-go, the Compose Specification's loader: its schema,
#                 interpolation, ports, durations...;
#   both          deploy/deploylint: compose references (depends_on,
#                 volumes, secrets, the Dockerfile) and that every variable
#                 set for ctxflow is one it reads (internal/config.Vars), to
#                 a value it accepts (internal/config.Check);
#   Dockerfile    its Go is go.mod's, its last USER is not root, and its
#                 static build (CGO_ENABLED=0, linux) resolves every package.
# Images are not built and nothing is run.
#
#   scripts/deploycheck.sh [DIR]   DIR has compose.yaml, Dockerfile, k8s/ (default: deploy)
#
# The tools are pinned in go.mod (go tool); KUBECONFORM and COMPOSE_SPEC may
# name other binaries. The schemas are made once from the OpenAPI document
# of the k8s.io/kubernetes module (a 19 MB download through the Go module
# proxy) and cached in ${XDG_CACHE_HOME:-~/.cache}/ctxflow/k8s-schemas.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(cd "${1:-deploy}" && pwd)
K8S_VERSION=1.35.4

tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
kubeconform=${KUBECONFORM:-$(go tool -n kubeconform)}
compose=${COMPOSE_SPEC:-$(go tool -n github.com/compose-spec/compose-go/v2/cmd)}
go build -o "$tmp/deploylint" ./deploy/deploylint

cache=${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/ctxflow/k8s-schemas/v$K8S_VERSION
if [ ! -f "$cache/_definitions.json" ]; then
  echo "deploycheck: making the Kubernetes $K8S_VERSION schemas in $cache"
  mod=$(cd "$tmp" && GOMODCACHE="$tmp/mod" GOFLAGS=-modcacherw go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  mkdir -p "$tmp/schemas" "$(dirname "$cache")"
  "$tmp/deploylint" schemas "$mod/api/openapi-spec/swagger.json" "$tmp/schemas"
  mv -T "$tmp/schemas" "$cache" 2>/dev/null || [ -f "$cache/_definitions.json" ]
fi

fail=0
shopt -s nullglob
manifests=("$dir"/k8s/*.yaml)
if [ ${#manifests[@]} -eq 0 ]; then
  echo "deploycheck: no manifests in $dir/k8s"
  fail=1
fi
"$kubeconform" -strict -summary -kubernetes-version "$K8S_VERSION" \
  -schema-location "$cache/{{.ResourceKind}}{{.KindSuffix}}.json" "${manifests[@]}" || fail=1
"$tmp/deploylint" k8s "${manifests[@]}" || fail=1

# From the compose file's directory, as docker compose resolves its paths.
if (cd "$dir" && "$compose" -format json compose.yaml >"$tmp/model.json"); then
  "$tmp/deploylint" compose <"$tmp/model.json" || fail=1
else
  fail=1
fi

go_version=$(go list -m -f '{{.GoVersion}}')
if ! grep -Eq "^FROM golang:${go_version%.*}[-.@ ]" "$dir/Dockerfile"; then
  echo "deploycheck: $dir/Dockerfile does not build FROM golang:${go_version%.*} (go.mod says go $go_version)"
  fail=1
fi
if grep -E '^USER ' "$dir/Dockerfile" | tail -1 | grep -Eq '^USER (root|0)(:|$)' || ! grep -q '^USER ' "$dir/Dockerfile"; then
  echo "deploycheck: $dir/Dockerfile's image runs as root (no USER, or USER root)"
  fail=1
fi
broken=$(CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go list -e -deps -f '{{with .Error}}{{.ImportPath}}: {{.Err}}{{end}}' ./cmd/ctxflow)
if [ -n "$broken" ]; then
  echo "deploycheck: the image's static build (CGO_ENABLED=0) of ./cmd/ctxflow fails:"
  echo "$broken"
  fail=1
fi

[ $fail -eq 0 ] && echo "deploycheck: ok"
exit $fail
