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
FUZZ_DECODE    ?= 5000x
FUZZ_REPAIR    ?= 20000x
FUZZ_ROUNDTRIP ?= 25000x
FUZZ_TOOLARGS  ?= 3000x
FUZZ_RUNSQL    ?= 3000x
# Minimising a new input counts outside -fuzztime, and by default it may
# take up to 60 s for each one; a count keeps the run bounded.
FUZZ_MINIMIZE  ?= 100x
# Packages that run with the race detector (fast, no embedded server); convo
# runs apart because its property tests take -rapid.checks.
UNIT_PKGS   = $(shell $(GO) list ./... | grep -v -e /tests -e /internal/devserver -e /internal/eval -e /convo)

.PHONY: record-histories all build run cluster cluster-stop test ollama unit convo-test fuzz e2e lint depcheck sizecheck bench profile reliability eval clean

all: lint test

build:
	$(GO) build -o $(BIN) ./cmd/ctxflow

## run: the whole service on embedded defaults (Temporal + UI + worker + API).
run: build
	./$(BIN) dev

## cluster: the production topology on this machine, without Docker
## (scripts/cluster.sh): PostgreSQL, Temporal on it (its schema set up by
## temporal-sql-tool) with its Web UI, the namespace and search attributes
## (ctxflow register), two `ctxflow worker` and `ctxflow api`, each a
## process; logs in $(CLUSTER_DIR). Started again, it starts what is not
## running. cluster-stop stops it.
CLUSTER_DIR ?= data/cluster
cluster: build
	CTXFLOW_BIN=$(abspath $(BIN)) ./scripts/cluster.sh start $(CLUSTER_DIR)

cluster-stop:
	./scripts/cluster.sh stop $(CLUSTER_DIR)

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
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeJSONL$$' -fuzztime=$(FUZZ_JSONL) -fuzzminimizetime=$(FUZZ_MINIMIZE) ./convo/
	$(GO) test -run='^$$' -fuzz='^FuzzCountMatchesReference$$' -fuzztime=$(FUZZ_TOKENS) -fuzzminimizetime=$(FUZZ_MINIMIZE) ./activities/tiktoken/
	$(GO) test -run='^$$' -fuzz='^FuzzImport$$' -fuzztime=$(FUZZ_IMPORT) -fuzzminimizetime=$(FUZZ_MINIMIZE) ./api/
	$(GO) test -run='^$$' -fuzz='^FuzzRequestDecoding$$' -fuzztime=$(FUZZ_DECODE) -fuzzminimizetime=$(FUZZ_MINIMIZE) ./api/
	$(GO) test -run='^$$' -fuzz='^FuzzExtractJSON$$' -fuzztime=$(FUZZ_REPAIR) -fuzzminimizetime=$(FUZZ_MINIMIZE) ./activities/
	$(GO) test -run='^$$' -fuzz='^FuzzExtractJSONRoundTrip$$' -fuzztime=$(FUZZ_ROUNDTRIP) -fuzzminimizetime=$(FUZZ_MINIMIZE) ./activities/
	$(GO) test -run='^$$' -fuzz='^FuzzToolArgs$$' -fuzztime=$(FUZZ_TOOLARGS) -fuzzminimizetime=$(FUZZ_MINIMIZE) ./activities/sqltools/
	$(GO) test -run='^$$' -fuzz='^FuzzRunSQL$$' -fuzztime=$(FUZZ_RUNSQL) -fuzzminimizetime=$(FUZZ_MINIMIZE) ./activities/sqltools/

# The embedded Temporal server (and the eval over 1,488 passages) is too slow
# under -race for the time budget. The end-to-end tests take about 13 min on
# 2 cores with two busy loops beside them (their own load tests add more):
# the timeout leaves room for a loaded machine.
e2e: ollama
	$(GO) test -count=1 -timeout=25m ./internal/devserver/... ./internal/eval/... ./tests/...

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
	CTXFLOW_RECORD_HISTORY=1 $(GO) test -count=1 -run '^(TestRecord|TestAgentTaskWithMCPServers$$)' ./tests/

## bench: ctxflow's figures and the peer's (LangGraph.js with its SQLite
## checkpointer, scripts/peer.sh) measured side by side in one run, printed as
## one table with the targets of issue 15 and written to bench/results.json.
## The peer runs before ctxflow's turns and again after its throughput; its
## figures are the mean of the two, so that the ratios compare both sides
## over the same minutes of a machine whose speed drifts.
## BENCH_SHORT=1 is the smoke run CI does (no thresholds; bench/out/ only).
BENCH_SHORT ?=
ifeq ($(BENCH_SHORT),1)
BENCH_TURNS ?= 20x
BENCH_SLOW ?= 3x
BENCH_THROUGHPUT ?= 60x
BENCH_CLUSTER ?= 30x
BENCH_REF ?= 10x
BENCH_HISTORY ?= 100
BENCH_AGENT ?= 2x
BENCH_KILL ?= 3x
BENCH_LONG ?= 5x
BENCH_LONG_MESSAGES ?= 10000
BENCH_FACT_TURNS ?= 40
BENCH_CHUNKS ?= 2000 10000
BENCH_PEER ?= --short
BENCH_JSON ?= bench/out/results.json
else
BENCH_TURNS ?= 300x
BENCH_SLOW ?= 10x
BENCH_THROUGHPUT ?= 1000x
BENCH_CLUSTER ?= 500x
BENCH_REF ?= 30x
BENCH_HISTORY ?= 10000
BENCH_AGENT ?= 10x
BENCH_KILL ?= 10x
BENCH_LONG ?= 30x
BENCH_LONG_MESSAGES ?= 100000
BENCH_FACT_TURNS ?= 200
BENCH_CHUNKS ?= 10000 100000
BENCH_PEER ?=
BENCH_JSON ?= bench/results.json
endif
BENCH_GO = $(GO) test -run='^$$' -timeout=30m

bench:
	@mkdir -p bench/out
	./scripts/peer.sh $(BENCH_PEER) >bench/out/peer.json
	{ $(BENCH_GO) -bench='^Benchmark(Turn|TurnPipeline|QATurn)$$' -benchtime=$(BENCH_TURNS) ./tests/ && \
	  $(BENCH_GO) -bench='^BenchmarkTurnSlowModel$$' -benchtime=$(BENCH_SLOW) ./tests/ && \
	  $(BENCH_GO) -bench='^BenchmarkThroughput$$' -benchtime=$(BENCH_THROUGHPUT) ./tests/ && \
	  ./scripts/peer.sh $(BENCH_PEER) >bench/out/peer-after.json && \
	  $(BENCH_GO) -bench='^BenchmarkCluster$$' -benchtime=$(BENCH_CLUSTER) ./tests/ && \
	  CTXFLOW_BENCH_HISTORY_TURNS=$(BENCH_HISTORY) $(BENCH_GO) -bench='^BenchmarkHistory$$' -benchtime=1x ./tests/ && \
	  $(BENCH_GO) -bench='^BenchmarkAgentStep$$' -benchtime=$(BENCH_AGENT) ./tests/ && \
	  $(BENCH_GO) -bench='^BenchmarkWorkerKill$$' -benchtime=$(BENCH_KILL) ./tests/ && \
	  CTXFLOW_BENCH_LONG_MESSAGES=$(BENCH_LONG_MESSAGES) $(BENCH_GO) -bench='^BenchmarkLongSession$$' -benchtime=$(BENCH_LONG) ./tests/ && \
	  CTXFLOW_BENCH_FACT_TURNS=$(BENCH_FACT_TURNS) $(BENCH_GO) -bench='^BenchmarkPromptTokens$$' -benchtime=1x ./tests/ && \
	  $(BENCH_GO) -bench='^BenchmarkFourActivityWorkflow$$' -benchtime=$(BENCH_REF) ./internal/devserver/ && \
	  $(BENCH_GO) -bench='^BenchmarkAssemble$$' ./convo/ && \
	  $(BENCH_GO) -bench='^BenchmarkIngest$$' -benchtime=2x ./activities/ && \
	  for n in $(BENCH_CHUNKS); do for v in random clustered; do \
	    CTXFLOW_BENCH_CHUNKS=$$n CTXFLOW_BENCH_VECTORS=$$v $(BENCH_GO) -bench='^BenchmarkSearch$$' -benchtime=200x ./activities/vecstore/ >bench/out/search.txt || exit 1; \
	    sed "s|^BenchmarkSearch|BenchmarkSearch/$$v/chunks=$$n|" bench/out/search.txt; \
	  done; done; } >bench/out/bench.txt 2>&1 || { tail -40 bench/out/bench.txt; exit 1; }
	$(GO) run ./bench/report -peer bench/out/peer.json,bench/out/peer-after.json -json $(BENCH_JSON) <bench/out/bench.txt

## profile: where a turn's CPU goes, by component: a CPU profile of 10
## sessions of chat turns with the server, the API and the worker in one
## process (BenchmarkInProcess), read by bench/profile into a table.
PROFILE_TURNS ?= 3000
profile:
	@mkdir -p bench/out
	$(GO) test -run='^$$' -bench='^BenchmarkInProcess$$' -benchtime=$(PROFILE_TURNS)x -cpuprofile=bench/out/cpu.out -o bench/out/tests.test ./tests/
	$(GO) run ./bench/profile -turns $(PROFILE_TURNS) bench/out/cpu.out

## reliability: the fault suite at full size, with four busy loops a core
## beside it (CTXFLOW_CPU_HOG) — 100 worker kills (SIGKILL) over 20
## sessions, the embedded server restarted mid-turn, the model server and
## the PostgreSQL store down, 200 clients for 60 s, ten bursts of 25
## concurrent turns to one session over HTTP, and the concurrent-turn kill
## test — printing its counts (`make test` runs the kills, bursts and
## concurrent turns bounded, under the same load: 10 kills, 3 bursts, and
## the rest without busy loops, 10 s of load). Log: bench/out/.
RELIABILITY_TESTS = ^(TestReliability.*|TestBurstOfTurnsQueues|TestDevBurstsUnderLoad|TestKillWorkerMidTurns)$$
reliability:
	@mkdir -p bench/out
	@CTXFLOW_CPU_HOG=$$((4 * $$(nproc))) CTXFLOW_RELIABILITY_KILLS=100 CTXFLOW_RELIABILITY_LOAD=60s CTXFLOW_BURSTS=10 \
		$(GO) test -count=1 -timeout=60m -v -run='$(RELIABILITY_TESTS)' ./tests/ >bench/out/reliability.log 2>&1 || \
		{ grep -E '(reliability|burst|e2e)_test.go|^(--- |ok|FAIL)' bench/out/reliability.log; exit 1; }
	@grep -E '(reliability|burst|e2e)_test.go|^(--- |ok|FAIL)' bench/out/reliability.log

## eval: every evaluation set under $(EVALDATA) (each <set>/cases.jsonl, the
## shared JSONL format): the worker's rewriter against the gold rewrites, the
## qa turn's retrieval over a set's passages, offline answers against gold
## answers; one table (README, "Tests"). EVAL_FLAGS: e.g. --limit 200,
## --json FILE; --detail adds recall per search mode and the corrective judges.
EVALDATA ?= ../shared/evaldata
EVAL_FLAGS ?= --detail
eval:
	@sets=$$(ls $(EVALDATA)/*/cases.jsonl 2>/dev/null); \
	if [ -z "$$sets" ]; then echo "eval: no evaluation sets in $(EVALDATA) (no $(EVALDATA)/*/cases.jsonl): set EVALDATA=DIR to the folder holding them; the tests use samples in internal/eval/testdata"; exit 2; fi; \
	$(GO) run ./cmd/ctxflow eval $$(for s in $$sets; do printf -- '--data %s ' "$$s"; done) $(EVAL_FLAGS)

clean:
	rm -rf bin
