#!/usr/bin/env bash
# Enforces the dependency rules of docs/architecture.md §1:
#   convo      imports the standard library only (directly and transitively);
#   lexical    imports the standard library, convo and the Chinese segmenter
#              (github.com/go-ego/gse, pure Go, and its trie) only;
#   workflows  imports the standard library, Temporal's SDK/API, convo and
#              activities (for method references) - and nothing it pulls in
#              transitively may be a vendor SDK (gin, ollama, openai, tiktoken,
#              milvus, pgx, sqlite, chromem, bleve);
#   the OpenAI SDK is imported by activities/openai alone;
#   the MCP SDK is imported by activities/mcp alone.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
fail=0

nonstd() { go list -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$@" 2>/dev/null | sed '/^$/d'; }

# convo: every transitive dependency must be standard library or convo itself.
for p in $(go list ./convo/...); do
  bad=$(go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$p" | grep -v "^$mod/convo" || true)
  if [ -n "$bad" ]; then echo "depcheck: $p imports non-standard packages:"; echo "$bad" | sed 's/^/  /'; fail=1; fi
done

# lexical: the standard library, convo and the segmenter, nothing else.
for p in $(go list ./lexical/...); do
  bad=$(go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$p" |
    grep -v -e "^$mod/lexical" -e "^$mod/convo" -e "^github.com/go-ego/gse\(/\|$\)" -e "^github.com/vcaesar/cedar$" || true)
  if [ -n "$bad" ]; then echo "depcheck: $p imports more than the standard library, convo and the segmenter:"; echo "$bad" | sed 's/^/  /'; fail=1; fi
done

# workflows: direct imports from an allow-list.
for p in $(go list ./workflows/...); do
  bad=$(go list -f '{{join .Imports "\n"}}' "$p" | xargs -r go list -f '{{if not .Standard}}{{.ImportPath}}{{end}}' \
    | grep -vE "^(go\.temporal\.io/(sdk|api)/|$mod/(convo|activities|workflows)$)" || true)
  if [ -n "$bad" ]; then echo "depcheck: $p imports packages workflows may not use:"; echo "$bad" | sed 's/^/  /'; fail=1; fi
done

# workflows and the activities root (which workflows imports): no vendor SDK
# anywhere below them, no document parser (PDF, HTML), no adapter: workflows
# link only what they run.
vendors='github.com/gin-gonic/|github.com/ollama/|github.com/openai/|github.com/modelcontextprotocol/|github.com/pkoukk/|github.com/milvus-io/|github.com/jackc/|sqlite|github.com/philippgille/|github.com/blevesearch/|github.com/ledongthuc/pdf|golang.org/x/net/html|/activities/(ingest|offline|vecstore|milvus|ollama|openai|mcp|transcript|tiktoken)$'
for p in $(go list ./workflows/... ./activities); do
  bad=$(go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$p" | grep -E "$vendors" || true)
  if [ -n "$bad" ]; then echo "depcheck: $p depends on vendor SDKs:"; echo "$bad" | sed 's/^/  /'; fail=1; fi
done

# The OpenAI SDK: its adapter (activities/openai) alone imports it.
bad=$(go list -f '{{.ImportPath}}: {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... |
  grep -v "^$mod/activities/openai:" | grep -E ' github\.com/openai/' | cut -d: -f1 || true)
if [ -n "$bad" ]; then echo "depcheck: only activities/openai may import the OpenAI SDK; so do:"; echo "$bad" | sed 's/^/  /'; fail=1; fi

# The MCP SDK: its adapter (activities/mcp) alone imports it.
bad=$(go list -f '{{.ImportPath}}: {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... |
  grep -v "^$mod/activities/mcp:" | grep -E ' github\.com/modelcontextprotocol/' | cut -d: -f1 || true)
if [ -n "$bad" ]; then echo "depcheck: only activities/mcp may import the MCP SDK; so do:"; echo "$bad" | sed 's/^/  /'; fail=1; fi

[ $fail -eq 0 ] && echo "depcheck: ok"
exit $fail
