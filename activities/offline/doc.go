// Package offline is ctxflow's built-in model provider: no weights, no
// network, deterministic, for Chinese and English (docs/architecture.md §5). It is the
// embedded default and the degraded mode, and it labels its answers as
// such.
//
// [Engine] implements [activities.ChatModel] from the parts below, which
// are pure functions a workflow or activity may also call directly:
//
//   - [Rewrite] makes a follow-up question stand alone: it detects a
//     pronoun, an ellipsis marker, a detail follow-up or a very short
//     question, tracks the topic of the history (the most salient recent
//     entity) and substitutes or adds it;
//   - [Grade] scores a document's relevance to a query lexically (keyword
//     and entity overlap, CJK bigram overlap);
//   - [Answer] quotes the sentences of the documents that carry what the
//     question asks about, each after the section heading it came from
//     and with its document's id, says honestly when none does, and
//     answers greetings with a template;
//   - [Summarize] folds messages into a running summary extractively,
//     keeping sentences with entities, numbers, decisions and preferences
//     within a token budget;
//   - [Embedder] embeds texts as hashed character n-grams (1–3 for CJK,
//     words and subwords otherwise), L2-normalised, in a fixed dimension.
package offline
