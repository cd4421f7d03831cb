// Package convo is the pure core of ctxflow's context engine: messages and
// conversation trees, token budgets, window trimming and summary compression.
//
// It imports only the standard library. Token counting goes through the
// [Tokenizer] port; the tiktoken implementation lives in
// activities/tiktoken. Workflow code and activities both use this package, so
// everything here is deterministic.
package convo
