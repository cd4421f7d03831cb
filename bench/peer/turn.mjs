// The peer row of `make bench`: ctxflow's turn rebuilt on LangGraph.js with its SQLite checkpointer.
//
// A StateGraph of six instant nodes (load_context → rewrite → retrieve → grade → generate → save), each
// returning a small state update; the state carries the chat transcript (`messages`, LangGraph's own
// messages reducer), which grows by two messages per turn: the question passed to invoke() and the answer
// that `generate` appends. The graph is compiled with SqliteSaver on a file in a temp dir, so every turn
// reads the thread's latest checkpoint and writes one checkpoint per step, as a LangGraph.js app would.
//
// Run by scripts/peer.sh, which installs the pinned packages (bench/peer/package-lock.json) and copies this
// file beside their node_modules. Prints exactly ONE JSON object on stdout; progress goes to stderr.
//
// Flags (all optional):
//   --turns N          one thread: N turns timed (default 200)
//   --threads T        concurrent threads, one transcript each, sharing one SqliteSaver (default 10)
//   --thread-turns M   turns per concurrent thread (default 50)
//   --bytes-to K       after the timed N turns, continue the same thread to turn K (e.g. 1000) to measure
//                      checkpoint bytes at turn 1000; default N (no continuation)
//   --short            CI smoke run: N=20, M=5 (a few seconds); also CTXFLOW_PEER_SHORT=1
//
// Output fields (times in milliseconds, bytes in bytes):
//   peer                     "langgraphjs"
//   version                  installed @langchain/langgraph version (read from its package.json)
//   versions                 installed versions: @langchain/langgraph, @langchain/langgraph-checkpoint,
//                            @langchain/langgraph-checkpoint-sqlite, @langchain/core, better-sqlite3,
//                            sqlite (the library compiled into better-sqlite3), node
//   nodes_per_turn           6
//   short                    true for --short
//   turns                    N, timed turns of the one-thread run (after 5 untimed warm-up turns on another db)
//   p50_ms, p99_ms, mean_ms, max_ms   per-turn latency over those N turns (nearest-rank percentiles)
//   first10_ms, last10_ms    mean latency of turns 1–10 and of turns N-9..N of that thread (the growth)
//   messages                 transcript length after turn N (2 per turn)
//   threads                  T; thread_turns: M
//   threads10_turns_per_s    T·M turns / wall time of the concurrent run (T = 10 unless --threads says otherwise)
//   threads10_p50_ms, threads10_p99_ms   per-turn latency inside the concurrent run
//   threads10_wall_s         wall time of the concurrent run
//   checkpoint_bytes_per_turn  {"10": b, "100": b, "1000": b}: bytes of the checkpoint, metadata and write
//                            blobs that turn k added to the SQLite tables (one thread); a key is present only if
//                            the run reached that turn
//   checkpoints_per_turn     checkpoint rows one turn adds (input step + one per node)
//   db_bytes                 {"10": b, ...}: size of the SQLite file plus its WAL after turn k
//   long_turns, long_last10_ms, long_wall_s   only with --bytes-to K > N: K, mean latency of turns K-9..K,
//                            wall time of the continuation
//   cpus, loadavg1           os.cpus().length and the 1-minute load average when the run started
//   wall_s                   whole run, imports included
import { mkdtempSync, rmSync, statSync, readFileSync } from "node:fs";
import { tmpdir, cpus, loadavg } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";

const started = performance.now();
const loadavg1 = loadavg()[0];

// Everything but the final JSON goes to stderr, so stdout stays one parseable object.
const log = (...a) => process.stderr.write(a.join(" ") + "\n");
console.log = (...a) => log(...a);

const usage = (msg) => {
  log(`peer: ${msg}\nusage: turn.mjs [--short] [--turns N] [--threads T] [--thread-turns M] [--bytes-to K]`);
  process.exit(2);
};
let flags;
try {
  ({ values: flags } = parseArgs({
    options: {
      turns: { type: "string" },
      threads: { type: "string" },
      "thread-turns": { type: "string" },
      "bytes-to": { type: "string" },
      short: { type: "boolean", default: false },
    },
    strict: true,
  }));
} catch (err) {
  usage(err.message);
}

const short = flags.short || process.env.CTXFLOW_PEER_SHORT === "1";
const posInt = (name, v, dflt) => {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) usage(`--${name} must be a positive integer, got ${JSON.stringify(v)}`);
  return n;
};
const turns = posInt("turns", flags.turns, short ? 20 : 200);
const threads = posInt("threads", flags.threads, 10);
const threadTurns = posInt("thread-turns", flags["thread-turns"], short ? 5 : 50);
const bytesTo = Math.max(turns, posInt("bytes-to", flags["bytes-to"], turns));
const BYTES_AT = [10, 100, 1000];

const { StateGraph, Annotation, MessagesAnnotation, START, END } = await import("@langchain/langgraph");
const { SqliteSaver } = await import("@langchain/langgraph-checkpoint-sqlite");
const { HumanMessage, AIMessage } = await import("@langchain/core/messages");

const here = dirname(fileURLToPath(import.meta.url));
const pkgVersion = (name) =>
  JSON.parse(readFileSync(join(here, "node_modules", ...name.split("/"), "package.json"), "utf8")).version;

// The turn: six instant steps, each a small update; `generate` appends the answer to the transcript.
const State = Annotation.Root({
  ...MessagesAnnotation.spec,
  turn: Annotation(),
  query: Annotation(),
  docs: Annotation(),
  relevance: Annotation(),
  saved: Annotation(),
});

const lastHuman = (messages) => {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i].type === "human") return messages[i];
  throw new Error("no question in the transcript");
};

function buildGraph(checkpointer) {
  return new StateGraph(State)
    .addNode("load_context", (s) => ({ turn: (s.turn ?? 0) + 1 }))
    .addNode("rewrite", (s) => ({ query: `standalone: ${lastHuman(s.messages).content}` }))
    .addNode("retrieve", (s) => ({ docs: [`doc-${s.turn % 7}#1`, `doc-${s.turn % 5}#2`] }))
    .addNode("grade", (s) => ({ relevance: s.docs.length > 0 ? "relevant" : "irrelevant" }))
    .addNode("generate", (s) => ({ messages: [new AIMessage(`answer ${s.turn} to: ${s.query}`)] }))
    .addNode("save", (s) => ({ saved: s.messages.length }))
    .addEdge(START, "load_context")
    .addEdge("load_context", "rewrite")
    .addEdge("rewrite", "retrieve")
    .addEdge("retrieve", "grade")
    .addEdge("grade", "generate")
    .addEdge("generate", "save")
    .addEdge("save", END)
    .compile({ checkpointer });
}

// One turn of one thread; returns its latency in ms and checks that it really ran.
async function turn(graph, threadId, n) {
  const t0 = performance.now();
  const out = await graph.invoke(
    { messages: [new HumanMessage(`question ${n}: what does the context say about topic ${n}?`)] },
    { configurable: { thread_id: threadId } },
  );
  const ms = performance.now() - t0;
  if (out.turn !== n || out.messages.length !== 2 * n || out.saved !== 2 * n) {
    throw new Error(`thread ${threadId} turn ${n}: got turn=${out.turn} messages=${out.messages.length} saved=${out.saved}`);
  }
  return ms;
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
const round = (x, d = 2) => Math.round(x * 10 ** d) / 10 ** d;
const stats = (lat) => {
  const s = [...lat].sort((a, b) => a - b);
  return { p50: round(percentile(s, 50)), p99: round(percentile(s, 99)), mean: round(mean(s)), max: round(s[s.length - 1]) };
};

const dir = mkdtempSync(join(tmpdir(), "ctxflow-peer-"));
const savers = [];
const openSaver = (name) => {
  const saver = SqliteSaver.fromConnString(join(dir, name));
  saver.setup(); // creates the tables now, so the byte counts below can read them before the first turn
  savers.push(saver);
  return saver;
};
const fileBytes = (path) => {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
};

try {
  // Warm-up on its own file: module loading and JIT are not part of any timed turn.
  {
    const g = buildGraph(openSaver("warmup.sqlite"));
    for (let n = 1; n <= 5; n++) await turn(g, "warmup", n);
  }

  // One thread, N turns (then optionally on to K), with the bytes each measured turn adds.
  const dbPath = join(dir, "one.sqlite");
  const saver = openSaver("one.sqlite");
  const graph = buildGraph(saver);
  const blobSums = () =>
    saver.db
      .prepare(
        `SELECT (SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM checkpoints) +
                (SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes) AS bytes,
                (SELECT COUNT(*) FROM checkpoints) AS rows`,
      )
      .get();
  const bytesPerTurn = {};
  const dbBytes = {};
  let checkpointsPerTurn = null;
  const lat = [];
  const longLast = [];
  let longStart = 0;
  for (let n = 1; n <= bytesTo; n++) {
    if (n === turns + 1) longStart = performance.now();
    const measure = BYTES_AT.includes(n);
    const before = measure || n === 1 ? blobSums() : null;
    const ms = await turn(graph, "session-1", n);
    if (n <= turns) lat.push(ms);
    else if (n > bytesTo - 10) longLast.push(ms);
    if (n === 1) checkpointsPerTurn = blobSums().rows - before.rows;
    if (measure) {
      bytesPerTurn[n] = blobSums().bytes - before.bytes;
      dbBytes[n] = fileBytes(dbPath) + fileBytes(`${dbPath}-wal`);
    }
    if (n % 100 === 0) log(`peer: one thread, turn ${n}/${bytesTo}, last ${ms.toFixed(1)} ms`);
  }
  const longWall = bytesTo > turns ? (performance.now() - longStart) / 1000 : null;
  const one = stats(lat);

  // T threads at once in this process, one shared checkpointer on a fresh file.
  const graphT = buildGraph(openSaver("threads.sqlite"));
  const latT = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: threads }, async (_, i) => {
      for (let n = 1; n <= threadTurns; n++) latT.push(await turn(graphT, `session-${i + 1}`, n));
    }),
  );
  const wallT = (performance.now() - t0) / 1000;
  const conc = stats(latT);

  const result = {
    peer: "langgraphjs",
    version: pkgVersion("@langchain/langgraph"),
    versions: {
      "@langchain/langgraph": pkgVersion("@langchain/langgraph"),
      "@langchain/langgraph-checkpoint": pkgVersion("@langchain/langgraph-checkpoint"),
      "@langchain/langgraph-checkpoint-sqlite": pkgVersion("@langchain/langgraph-checkpoint-sqlite"),
      "@langchain/core": pkgVersion("@langchain/core"),
      "better-sqlite3": pkgVersion("better-sqlite3"),
      sqlite: saver.db.prepare("SELECT sqlite_version() AS v").get().v,
      node: process.version,
    },
    nodes_per_turn: 6,
    short,
    turns,
    p50_ms: one.p50,
    p99_ms: one.p99,
    mean_ms: one.mean,
    max_ms: one.max,
    first10_ms: round(mean(lat.slice(0, 10))),
    last10_ms: round(mean(lat.slice(-10))),
    messages: 2 * turns,
    threads,
    thread_turns: threadTurns,
    threads10_turns_per_s: round((threads * threadTurns) / wallT, 1),
    threads10_p50_ms: conc.p50,
    threads10_p99_ms: conc.p99,
    threads10_wall_s: round(wallT, 3),
    checkpoint_bytes_per_turn: bytesPerTurn,
    checkpoints_per_turn: checkpointsPerTurn,
    db_bytes: dbBytes,
    ...(bytesTo > turns
      ? { long_turns: bytesTo, long_last10_ms: round(mean(longLast)), long_wall_s: round(longWall, 1) }
      : {}),
    cpus: cpus().length,
    loadavg1: round(loadavg1),
    wall_s: round((performance.now() - started) / 1000, 2),
  };
  process.stdout.write(JSON.stringify(result) + "\n");
} finally {
  for (const s of savers) s.db.close();
  rmSync(dir, { recursive: true, force: true });
}
