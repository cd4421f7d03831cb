package offline

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/ctxflow/ctxflow/lexical"
)

// candidate is a passage that answers the question, with its score and
// how well it names each of the question's entities (see
// question.naming).
type candidate struct {
	passage
	score  float64
	share  float64 // of the aspects' weight carried
	naming []float64
}

// selectPassages chooses the passages of docs that answer q, in document
// order: for a question about its entities as a whole, the opening of the
// documents about them (see overview); else the passages that carry the
// question's aspect (see question.carries), those that name its entities
// best and carry at least half as much of its aspects as the best, at most
// maxAnswerSentences of them and none scoring below half the best. None
// when no passage carries the aspect: the honest answer.
func selectPassages(q question, docs []Document) []passage {
	var all []passage
	lower := make([]string, len(docs)) // the documents in lower case
	for i, d := range docs {
		all = append(all, passages(i, d)...)
		lower[i] = strings.ToLower(d.Text)
	}
	if q.intro() {
		if ps := overview(q, docs, all); len(ps) > 0 {
			return ps
		}
	}
	q.weigh(all)
	var cands []candidate
	for _, p := range all {
		if c, ok := q.candidate(lower[p.doc], p); ok {
			cands = append(cands, c)
		}
	}
	cands = bestFitting(bestNamed(cands))
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(b.score, a.score) })
	n := 0
	for n < len(cands) && n < maxAnswerSentences && cands[n].score >= cands[0].score/2 {
		n++
	}
	out := make([]passage, n)
	for i, c := range cands[:n] {
		out[i] = c.passage
	}
	return inDocumentOrder(out)
}

// candidate scores passage p of a document (doc, in lower case) for q,
// false when p does not carry what q asks about. The score adds the share
// of aspects carried, half the naming of the entities, and bonuses for
// holding the value asked for, for defining the subject of a definition
// question, and (a tenth) for the sentence's lexical grade.
func (q question) candidate(doc string, p passage) (candidate, bool) {
	share, ok := q.carries(p)
	if !ok {
		return candidate{}, false
	}
	lower := p.lower
	c := candidate{passage: p, share: share, naming: q.naming(doc, p)}
	c.score = share + mean(c.naming)/2 + 0.1*lexical.GradeSentence(q.text, p.text).Score
	if q.holdsWanted(lower) {
		c.score += 0.3
	}
	if q.defined != "" && definesSubject(p.text, q.defined) {
		c.score += 0.3
	}
	return c, true
}

// carries reports whether passage p carries what q asks about, with the
// share of its aspects it carries weighted by their rarity (see
// question.weigh; the score ranks by it: the rare aspect of "华为手表…" is
// 手表, not 华为): at least half of the aspects the documents speak of,
// each spoken of in the sentence or its section heading (see hasAspect);
// without aspects, a value of the kind asked for ("多少钱"); for a
// question of entities alone, naming one of them.
func (q question) carries(p passage) (float64, bool) {
	lower := p.lower
	switch {
	case len(q.aspects) > 0:
		var present, matched int
		var total, got float64
		for i, a := range q.aspects {
			if q.weights[i] == 0 {
				continue
			}
			present++
			total += q.weights[i]
			if hasAspect(p, a, q.cues[i]) {
				matched++
				got += q.weights[i]
			}
		}
		if present == 0 { // the documents speak of none of the aspects
			return 0, false
		}
		return got / total, matched > 0 && 2*matched >= present
	case len(q.wants) > 0:
		return 1, q.holdsWanted(lower)
	case len(q.entities) > 0:
		for _, e := range q.entities {
			if mentions(lower, e) {
				return 1, true
			}
		}
	}
	return 0, false
}

// hasAspect reports whether passage p speaks of aspect a: the sentence or
// its section heading names it, or, for an aspect that names a kind of
// value (cue, see kindOfCue: "价格", "price"), the sentence holds such a
// value ("售价5999元").
func hasAspect(p passage, a string, cue *valueKind) bool {
	if mentions(p.lower, a) || mentions(p.lowerSection, a) {
		return true
	}
	return cue != nil && cue.fits(p.lower)
}

// weigh weighs q's aspects by how rare they are among the passages that
// may answer, as an inverse document frequency: ln(1 + n/df) for an
// aspect that df of the n passages speak of. One that none speaks of
// weighs nothing: the documents word it otherwise ("手机自带手写笔" over
// "内置S Pen手写笔"); when no aspect is spoken of at all, they do not hold
// what is asked.
func (q *question) weigh(all []passage) {
	q.weights = make([]float64, len(q.aspects))
	q.cues = make([]*valueKind, len(q.aspects))
	for i, a := range q.aspects {
		if kind, ok := kindOfCue(a); ok {
			q.cues[i] = &kind
		}
		df := 0
		for _, p := range all {
			if hasAspect(p, a, q.cues[i]) {
				df++
			}
		}
		if df > 0 {
			q.weights[i] = math.Log(1 + float64(len(all))/float64(df))
		}
	}
}

// holdsWanted reports whether lower (a sentence, lower case) holds a value
// of a kind q asks for.
func (q question) holdsWanted(lower string) bool {
	return slices.ContainsFunc(q.wants, func(k valueKind) bool { return k.fits(lower) })
}

// naming is how well passage p of a document (doc, in lower case) names
// each of q's entities: 1 when the document is about it (see about), ½
// when the sentence, its section or the document's title names it, ¼ when
// only the rest of the document does, else 0.
func (q question) naming(doc string, p passage) []float64 {
	near := strings.ToLower(p.text + "\n" + p.section + "\n" + p.title)
	out := make([]float64, len(q.entities))
	for i, e := range q.entities {
		switch {
		case about(p.title, e):
			out[i] = 1
		case mentions(near, e):
			out[i] = 0.5
		case mentions(doc, e):
			out[i] = 0.25
		}
	}
	return out
}

// mean is the mean of xs, 1 for none.
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 1
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// bestNamed keeps the candidates that name one of the question's entities
// best: a sentence about another product, or one that names the
// question's in passing, does not answer while one from the document about
// it does; in a comparison, each entity keeps its own best. With entities
// that no candidate names, none is kept (the documents speak of something
// else).
func bestNamed(cands []candidate) []candidate {
	if len(cands) == 0 {
		return cands
	}
	best := make([]float64, len(cands[0].naming))
	for _, c := range cands {
		for i, x := range c.naming {
			best[i] = max(best[i], x)
		}
	}
	if len(best) == 0 {
		return cands
	}
	return slices.DeleteFunc(cands, func(c candidate) bool {
		for i, x := range c.naming {
			if x > 0 && x == best[i] {
				return false
			}
		}
		return true
	})
}

// bestFitting keeps the candidates that carry at least half as much of
// the aspects' weight as the best: a sentence that shares only a common
// word with the question ("华为") gives way to one that holds its rare
// one ("手表").
func bestFitting(cands []candidate) []candidate {
	if len(cands) == 0 {
		return cands
	}
	best := slices.MaxFunc(cands, func(a, b candidate) int { return cmp.Compare(a.share, b.share) }).share
	return slices.DeleteFunc(cands, func(c candidate) bool { return c.share < best/2 })
}

// overview answers a question about entities as a whole from the
// documents about them: those whose title is an entity (or, failing any,
// names one). From each, the sentences of its lead, then the first
// sentence of each section, taken in turns across the documents, at most
// maxAnswerSentences. None when no document is about the entities.
func overview(q question, docs []Document, all []passage) []passage {
	about := make([]int, len(docs))
	best := 0
	for _, p := range all {
		if about[p.doc] == 0 {
			about[p.doc] = q.aboutness(p.title)
			best = max(best, about[p.doc])
		}
	}
	if best == 0 {
		return nil
	}
	type ranked struct {
		passage
		turn int // the passage's place in its document's overview
	}
	var picks []ranked
	turns := map[int]int{}
	section := map[int]string{} // the section of each document's last passage
	for _, p := range all {
		if about[p.doc] != best {
			continue
		}
		if p.section == "" || p.section != section[p.doc] {
			picks = append(picks, ranked{p, turns[p.doc]})
			turns[p.doc]++
		}
		section[p.doc] = p.section
	}
	slices.SortStableFunc(picks, func(a, b ranked) int { return cmp.Compare(a.turn, b.turn) })
	out := make([]passage, 0, maxAnswerSentences)
	for _, r := range picks[:min(len(picks), maxAnswerSentences)] {
		out = append(out, r.passage)
	}
	return inDocumentOrder(out)
}

// aboutness is how much a document titled title is about q's entities: 2
// when it is about one of them (see about), 1 when its title names one,
// else 0.
func (q question) aboutness(title string) int {
	best := 0
	for _, e := range q.entities {
		switch {
		case about(title, e):
			return 2
		case mentions(strings.ToLower(title), e):
			best = 1
		}
	}
	return best
}

// about reports whether a document titled title is about entity e (lower
// case): the title is the entity, maybe with a CJK brand before a Latin
// name ("华为Mate60" is about "mate60" and "华为mate60").
func about(title, e string) bool {
	t := compact(strings.ToLower(title))
	if t == "" {
		return false
	}
	return t == compact(e) || compact(latinCore(t)) == compact(e) || compact(latinCore(e)) == t
}

// compact is s without spaces, for comparing names ("iPhone15").
func compact(s string) string { return strings.Join(strings.Fields(s), "") }

// unanswered are the entities of a question about several ("Mate60和
// iPhone 15哪个…") that none of quotes speaks of, as the question spells
// them.
func (q question) unanswered(quotes []passage) []string {
	if len(q.entities) < 2 {
		return nil
	}
	var out []string
	for _, e := range q.entities {
		if !slices.ContainsFunc(quotes, func(p passage) bool {
			return mentions(strings.ToLower(p.text+"\n"+p.section+"\n"+p.title), e)
		}) {
			out = append(out, q.spelling(e))
		}
	}
	return out
}

// spelling is keyword k (lower case) as the question spells it.
func (q question) spelling(k string) string {
	if i := strings.Index(strings.ToLower(q.text), k); i >= 0 && len(strings.ToLower(q.text)) == len(q.text) {
		return q.text[i : i+len(k)]
	}
	return k
}

// inDocumentOrder sorts passages by document, then position.
func inDocumentOrder(ps []passage) []passage {
	slices.SortStableFunc(ps, func(a, b passage) int {
		return cmp.Or(cmp.Compare(a.doc, b.doc), cmp.Compare(a.pos, b.pos))
	})
	return ps
}
