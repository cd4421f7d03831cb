# ctxflow — see README.md. Every target works on a fresh clone: tools are
# pinned in go.mod (`go tool ...`), nothing is installed by hand.
GO          ?= go
BIN         ?= bin/ctxflow
RAPID_CHECKS ?= 200
# Execution counts, not durations: a duration races the fuzz coordinator's
# deadline in Go 1.26 (go.dev/issue/75804, fixed in 1.27) and fails with a
# bare "context deadline exceeded" on a loaded machine. About 10 s each here.
FUZZ_JSONL  ?= 100000x
FUZZ_TOKENS ?= 3000x
FUZZ_IMPORT ?= 3000x
# Packages that run with the race detector (fast, no embedded server); convo
# runs apart because its property tests take -rapid.checks.
UNIT_PKGS   = $(shell $(GO) list ./... | grep -v -e /tests -e /internal/devserver -e /internal/eval -e /convo)

.PHONY: record-histories all build run test ollama unit convo-test fuzz e2e lint depcheck sizecheck bench eval clean

all: lint test

build:
	$(GO) build -o $(BIN) ./cmd/ctxflow

## run: the whole service on embedded defaults (Temporal + UI + worker + API).
run: build
	./$(BIN) dev

## test: unit + property + workflow tests (with -race), a short fuzz run, and
## the end-to-end tests against a real embedded Temporal server and a real
## Ollama built from source (once: ~9 min cold, cached in ~/.cache/ctxflow).
test: ollama unit convo-test fuzz e2e

# The real-Ollama tests must run, not skip, in `make test`.
export CTXFLOW_OLLAMA_TESTS = 1

ollama:
	./scripts/ollama-test-server.sh build >/dev/null

unit: ollama
	$(GO) test -race -count=1 $(UNIT_PKGS)

convo-test:
	$(GO) test -race -count=1 ./convo/... -args -rapid.checks=$(RAPID_CHECKS)

# A short bounded fuzz run in CI; the seed corpora live in testdata/fuzz.
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeJSONL$$' -fuzztime=$(FUZZ_JSONL) ./convo/
	$(GO) test -run='^$$' -fuzz='^FuzzCountMatchesReference$$' -fuzztime=$(FUZZ_TOKENS) ./activities/tiktoken/
	$(GO) test -run='^$$' -fuzz='^FuzzImport$$' -fuzztime=$(FUZZ_IMPORT) ./api/

# The embedded Temporal server (and the eval over 1,488 passages) is too slow
# under -race for the time budget.
e2e: ollama
	$(GO) test -count=1 -timeout=15m ./internal/devserver/... ./internal/eval/... ./tests/...

## lint: gofmt, go vet, staticcheck, workflowcheck, the dependency rules and
## the size of tracked files.
lint: depcheck sizecheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	$(GO) tool workflowcheck -config workflowcheck.config.yaml ./...
	./scripts/deploycheck.sh

depcheck:
	./scripts/depcheck.sh

sizecheck:
	./scripts/sizecheck.sh

## # record-histories re-records the workflow histories the replay test replays
# (tests/testdata): only on purpose, when running workflows may change.
record-histories:
	CTXFLOW_RECORD_HISTORY=1 $(GO) test -count=1 -run '^TestRecord' ./tests/

bench: benchmarks of the context engine, tokenizer and turn pipeline.
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

## eval: retrieval recall@5 (dense, keyword, hybrid) and the corrective
## loop's judges on the mtrag dev set, through the qa turn's retrieval.
## It reads $(EVALDATA)/mtrag; point it elsewhere with EVALDATA=DIR.
EVALDATA ?= ../shared/evaldata
eval:
	@test -f $(EVALDATA)/mtrag/passages.jsonl || { echo "eval: no $(EVALDATA)/mtrag/passages.jsonl: set EVALDATA=DIR to the folder holding mtrag/ (the tests use internal/eval/testdata)"; exit 2; }
	$(GO) run ./cmd/ctxflow eval $(EVALDATA)/mtrag

clean:
	rm -rf bin
