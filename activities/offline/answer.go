package offline

import (
	"fmt"
	"strings"

	"github.com/ctxflow/ctxflow/lexical"
)

// Document is a text the answerer may quote, named by its id.
type Document struct {
	ID   string
	Text string
}

// AnswerKind says what kind of answer [Answer] gave.
type AnswerKind string

// The kinds of answer.
const (
	// AnswerGreeting is a template reply to a greeting, thanks or goodbye.
	AnswerGreeting AnswerKind = "greeting"
	// AnswerExtractive quotes the documents.
	AnswerExtractive AnswerKind = "extractive"
	// AnswerNotFound says the documents hold nothing on the question.
	AnswerNotFound AnswerKind = "not_found"
	// AnswerNoKnowledge says there were no documents to answer from.
	AnswerNoKnowledge AnswerKind = "no_knowledge"
)

// AnswerResult is an answer of the offline engine.
type AnswerResult struct {
	// Text is the answer, labelled as the offline engine's.
	Text string
	// Kind says which of the answers above it is.
	Kind AnswerKind
	// Sources are the ids of the documents quoted, in order of first
	// quotation.
	Sources []string
}

// maxAnswerSentences bounds an extractive answer.
const maxAnswerSentences = 3

// Answer answers question from docs without a language model, in the
// question's language (Chinese or English); see [AnswerIn].
func Answer(question string, docs []Document) AnswerResult {
	return AnswerIn(question, docs, lexical.IsChinese(strings.TrimSpace(question)))
}

// AnswerIn answers question from docs without a language model, in
// Chinese when zh is set, else in English. docs are trusted as relevant
// (the corrective loop's passed documents, a search tool's kept passages):
// they are not graded again. The answer is
//
//   - a template reply to greetings, thanks and goodbyes;
//   - else the sentences of docs that carry what the question asks about
//     (its aspects, "续航", "phone number"; or the kind of value it asks
//     for, "多少钱" → a price; or, for a question about an entity as a
//     whole, "介绍下华为Mate60", the opening of the document about it), at
//     most 3, best first and then in document order, each after the
//     section heading it came from when the sentence does not name it and
//     followed by its document's id — never a heading alone;
//   - else an honest answer that the knowledge base has nothing on the
//     question (or, with no documents at all, that there is no knowledge
//     base to answer from).
//
// A sentence about another entity than the question's does not answer it
// while one about the question's own does. Every answer is labelled as the
// offline engine's. AnswerIn is a pure function of its arguments.
func AnswerIn(question string, docs []Document, zh bool) AnswerResult {
	q := strings.TrimSpace(question)
	label := lexical.LabelEN + " "
	if zh {
		label = lexical.LabelZH
	}
	if kind := lexical.SmallTalkKind(q); kind != "" {
		return AnswerResult{Text: label + greetingReply(kind, zh), Kind: AnswerGreeting}
	}
	if len(docs) == 0 {
		subject, _ := lexical.TrimEndPunct(lexical.ClipRunes(q, 80))
		text := fmt.Sprintf("%s%s “%s”.", label, cannotAnswerEN, subject)
		if zh {
			text = fmt.Sprintf("%s%s「%s」。", label, cannotAnswerZH, subject)
		}
		return AnswerResult{Text: text, Kind: AnswerNoKnowledge}
	}
	rq := readQuestion(q)
	quotes := selectPassages(rq, docs)
	if len(quotes) == 0 {
		return nothingFound(q, zh)
	}
	return extractive(label, zh, rq, docs, quotes)
}

// extractive writes the answer quoting quotes (in order), with the
// entities of a comparison that no quote speaks of.
func extractive(label string, zh bool, q question, docs []Document, quotes []passage) AnswerResult {
	var b strings.Builder
	b.WriteString(label)
	if zh {
		b.WriteString("知识库摘录：")
	} else {
		b.WriteString("From the knowledge base:")
	}
	res := AnswerResult{Kind: AnswerExtractive}
	seen := map[string]bool{}
	several := quotesSeveral(quotes)
	for _, p := range quotes {
		id := docs[p.doc].ID
		fmt.Fprintf(&b, "\n- %s [%s]", lexical.ClipRunes(p.quoted(several, zh), 400), id)
		if !seen[id] {
			seen[id] = true
			res.Sources = append(res.Sources, id)
		}
	}
	if missing := q.unanswered(quotes); len(missing) > 0 {
		if zh {
			fmt.Fprintf(&b, "\n知识库中没有关于「%s」的这方面内容。", strings.Join(missing, "」「"))
		} else {
			fmt.Fprintf(&b, "\nThe knowledge base has nothing on this for “%s”.", strings.Join(missing, "”, “"))
		}
	}
	res.Text = b.String()
	return res
}

// quotesSeveral reports whether quotes come from more than one document.
func quotesSeveral(quotes []passage) bool {
	for _, p := range quotes {
		if p.doc != quotes[0].doc {
			return true
		}
	}
	return false
}

// nothingFound is the honest answer, in Chinese when zh is set, when the
// knowledge base holds nothing on question q.
func nothingFound(q string, zh bool) AnswerResult {
	subject, _ := lexical.TrimEndPunct(lexical.ClipRunes(q, 80))
	if zh {
		return AnswerResult{Text: fmt.Sprintf("%s%s「%s」的内容。", lexical.LabelZH, nothingOnZH, subject), Kind: AnswerNotFound}
	}
	return AnswerResult{Text: fmt.Sprintf("%s %s “%s”.", lexical.LabelEN, nothingOnEN, subject), Kind: AnswerNotFound}
}

// The engine's answers that say it has none: they quote the question, so a
// summary would keep them for its numbers and names (see nonAnswers).
const (
	cannotAnswerEN = "No language model and no knowledge base are available offline, so I cannot answer"
	cannotAnswerZH = "离线模式下没有可用的语言模型，也没有可检索的知识库，无法回答"
	nothingOnEN    = "The knowledge base has nothing on"
	nothingOnZH    = "知识库中没有关于"
)

// greetingReply is the template reply to a greeting of the given kind.
func greetingReply(kind string, zh bool) string {
	switch {
	case kind == lexical.Thanks && zh:
		return "不客气！"
	case kind == lexical.Thanks:
		return "You're welcome!"
	case kind == lexical.Bye && zh:
		return "再见！"
	case kind == lexical.Bye:
		return "Goodbye!"
	case zh:
		return "你好！我以离线模式运行，没有语言模型，只能摘录知识库中的内容。想了解什么？"
	}
	return "Hello! I am running offline, without a language model: I can quote the knowledge base, not converse. What would you like to know?"
}

// definesSubject reports whether sentence s reads like a definition of
// subject: it opens (after list or heading marks) with the subject.
func definesSubject(s, subject string) bool {
	s = strings.TrimLeft(strings.TrimSpace(s), "#-*> \t")
	return strings.HasPrefix(strings.ToLower(s), subject)
}
