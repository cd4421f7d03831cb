// Package convo is the pure core of ctxflow's context engine: messages and
// conversation trees, token budgets, window trimming and summary compression.
//
// It imports only the standard library. Token counting goes through the
// [Tokenizer] port; the tiktoken implementation lives in
// activities/tiktoken. Workflow code and activities both use this package, so
// everything here is deterministic: no I/O, no clocks, no randomness, no map
// iteration in results.
//
// # Transcript and model view
//
// A session is a [Tree] of [Message]s; the active leaf selects a branch.
// The full transcript of a branch is [Tree.Branch]. The model view is a
// [Context] built by [Tree.Assemble] (or [Assemble] on a slice): the system
// prompt, the running summary and the kept window, rendered by
// [Context.ModelMessages] with long tool outputs compressed
// ([CompressObservation]). Both views come from the same tree.
//
// # Tokens
//
// [MessageTokens] is a message's cost in the model view, chat-format overhead
// included; it is computed once and stored in Message.Tokens. Every token
// total here is a [PromptTokens] value, so a budget is a budget for the whole
// prompt.
//
// # Windows
//
// [WindowConfig] carries the seed options (sliding_window, token_limit,
// hybrid; max_rounds, max_tokens, start_on, include_system). [Trim] cuts a
// window from a slice in O(branch); [Tree.Window] gives the same result in
// O(window), using per-node depth, token prefix sums and jump pointers.
// The system prompt and the newest user message are always kept, and a tool
// call is never separated from its result.
//
// # Summaries
//
// The running summary ([SummaryState]) is advanced step by step:
// [Tree.PlanSummary] decides when and what to fold, [SummaryPlan.Prompt]
// builds the summariser's prompt, [Summarize] calls the model through a
// [Summarizer] hook unless the [SummaryCache] has the [SummaryCacheKey], and
// [Tree.Assemble] shows the result within MaxTokens. When the summariser
// fails, [Tree.AssembleFallback] degrades to the last N messages.
// [SummaryRecord] stores a summary in the transcript as a "summary" entry.
//
// # Files
//
// [EncodeJSONL] and [DecodeJSONL] read and write session files in the seed
// format ({"id","parentId","type","content","timestamp","metadata"}), one
// entry at a time with [MarshalEntry] and [UnmarshalEntry].
package convo
