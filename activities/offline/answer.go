package offline

import (
	"fmt"
	"sort"
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

// quantityWords ask for a number: sentences with digits rank higher.
var quantityWords = []string{"多少", "几", "价格", "售价", "how much", "how many", "price", "cost", "when", "what year", "version", "版本", "时间"}

// Answer answers question from docs without a language model: a template
// reply to greetings, thanks and goodbyes; else the sentences of the
// relevant documents (see [Grade]) that score best against the question,
// at most 3 and none below half the best score, each followed by its document's id; else an honest answer that
// the knowledge base has nothing on the question (or, with no documents at
// all, that there is no knowledge base to answer from). Every answer is
// labelled as the offline engine's and is in the question's language
// (Chinese or English).
//
// Answer is a pure function of its arguments.
func Answer(question string, docs []Document) AnswerResult {
	q := strings.TrimSpace(question)
	zh := lexical.IsChinese(q)
	label := lexical.LabelEN + " "
	if zh {
		label = lexical.LabelZH
	}
	if kind := lexical.SmallTalkKind(q); kind != "" {
		return AnswerResult{Text: label + greetingReply(kind, zh), Kind: AnswerGreeting}
	}
	subject, _ := lexical.TrimEndPunct(lexical.Clip(q, 80))
	if len(docs) == 0 {
		text := fmt.Sprintf("%sNo language model and no knowledge base are available offline, so I cannot answer “%s”.", label, subject)
		if zh {
			text = fmt.Sprintf("%s离线模式下没有可用的语言模型，也没有可检索的知识库，无法回答「%s」。", label, subject)
		}
		return AnswerResult{Text: text, Kind: AnswerNoKnowledge}
	}
	type sent struct {
		text  string
		doc   int // rank of the document
		pos   int
		score float64
	}
	type rankedDoc struct {
		i     int
		score float64
	}
	var relevant []rankedDoc
	for i, d := range docs {
		if g := lexical.Grade(q, d.Text); g.Relevant {
			relevant = append(relevant, rankedDoc{i, g.Score})
		}
	}
	if len(relevant) == 0 {
		return nothingFound(q)
	}
	sort.SliceStable(relevant, func(a, b int) bool { return relevant[a].score > relevant[b].score })
	wantsNumber := lexical.ContainsAny(strings.ToLower(q), quantityWords)
	defined := strings.ToLower(lexical.DefinitionSubject(q))
	var cands []sent
	for rank, r := range relevant {
		for pos, s := range lexical.Sentences(docs[r.i].Text) {
			sc := lexical.GradeSentence(q, s).Score
			if wantsNumber && lexical.HasDigit(s) {
				sc += 0.15
			}
			if defined != "" && definesSubject(s, defined) {
				sc += 0.3
			}
			if sc > 0 {
				cands = append(cands, sent{text: s, doc: rank, pos: pos, score: sc})
			}
		}
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].score > cands[b].score })
	// Keep the best sentences, and only those close to the best one.
	n := 0
	for n < len(cands) && n < maxAnswerSentences && cands[n].score >= cands[0].score/2 {
		n++
	}
	cands = cands[:n]
	if len(cands) == 0 { // relevant as a whole, no sentence stands out
		cands = append(cands, sent{text: lexical.Clip(strings.TrimSpace(docs[relevant[0].i].Text), 300)})
	}
	sort.SliceStable(cands, func(a, b int) bool {
		if cands[a].doc != cands[b].doc {
			return cands[a].doc < cands[b].doc
		}
		return cands[a].pos < cands[b].pos
	})
	var b strings.Builder
	b.WriteString(label)
	if zh {
		b.WriteString("知识库摘录：")
	} else {
		b.WriteString("From the knowledge base:")
	}
	res := AnswerResult{Kind: AnswerExtractive}
	seen := map[string]bool{}
	for _, c := range cands {
		id := docs[relevant[c.doc].i].ID
		fmt.Fprintf(&b, "\n- %s [%s]", lexical.Clip(c.text, 400), id)
		if !seen[id] {
			seen[id] = true
			res.Sources = append(res.Sources, id)
		}
	}
	res.Text = b.String()
	return res
}

// nothingFound is the honest answer when the knowledge base holds nothing
// on question q.
func nothingFound(q string) AnswerResult {
	subject, _ := lexical.TrimEndPunct(lexical.Clip(q, 80))
	if lexical.IsChinese(q) {
		return AnswerResult{Text: fmt.Sprintf("%s知识库中没有关于「%s」的内容。", lexical.LabelZH, subject), Kind: AnswerNotFound}
	}
	return AnswerResult{Text: fmt.Sprintf("%s The knowledge base has nothing on “%s”.", lexical.LabelEN, subject), Kind: AnswerNotFound}
}

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
