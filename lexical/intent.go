package lexical

import (
	"context"
	"math"
	"slices"
	"strings"

	"github.com/ctxflow/ctxflow/convo"
)

// The intent labels are convo's (seed 002, component 1).
const (
	IntentQA       = convo.IntentQA
	IntentChitchat = convo.IntentChitchat
	IntentTask     = convo.IntentTask
	IntentContinue = convo.IntentContinue
	IntentClarify  = convo.IntentClarify
)

// Intents classifies a question among labels (convo.DefaultIntents when nil) by
// the cosine similarity of its terms (words for Latin script, characters
// and character pairs for Chinese) to each label's description and
// examples: the best match of each label, turned into a distribution by a
// softmax. Small talk as [IsSmallTalk] knows it is chitchat, and qa gets a
// small prior: a question like no example is most likely a question.
type Intents struct {
	Labels []convo.IntentLabel

	vecs [][]termVec // per label: description, then examples
	idf  map[string]float64
	// unseen is the weight of a term no description or example has.
	unseen float64
}

// termVec is a bag of terms with its norm.
type termVec struct {
	w    map[string]float64
	norm float64
}

// intentSharpness turns similarities (0..1) into a distribution: a lead
// of 0.1 in similarity is a factor e in odds.
const intentSharpness = 10

// qaPrior is added to qa's similarity.
const qaPrior = 0.12

// historyWeight is added to a label's similarity per share of the recent
// intents that were it: a conversation tends to stay where it is.
const historyWeight = 0.1

// NewIntents prepares a classifier over labels (convo.DefaultIntents when
// nil).
func NewIntents(labels []convo.IntentLabel) *Intents {
	if labels == nil {
		labels = convo.DefaultIntents
	}
	c := &Intents{Labels: labels, idf: map[string]float64{}}
	var docs [][]termVec
	df := map[string]int{}
	n := 0
	for _, l := range labels {
		vs := []termVec{terms(l.Description)}
		for _, e := range l.Examples {
			vs = append(vs, terms(e))
		}
		for _, v := range vs {
			for t := range v.w {
				df[t]++
			}
		}
		n += len(vs)
		docs = append(docs, vs)
	}
	for t, k := range df {
		c.idf[t] = math.Log(1 + float64(n)/float64(k))
	}
	c.unseen = math.Log(1 + float64(n))
	for _, vs := range docs {
		for i := range vs {
			vs[i] = c.weigh(vs[i])
		}
		c.vecs = append(c.vecs, vs)
	}
	return c
}

// weigh scales a bag's terms by their inverse document frequency over the
// labels' texts: a term many labels share ("what", "?") says little, one
// none has (a product's name) says the question is about something.
func (c *Intents) weigh(v termVec) termVec {
	out := termVec{w: make(map[string]float64, len(v.w))}
	for t, x := range v.w {
		idf, ok := c.idf[t]
		if !ok {
			idf = c.unseen
		}
		out.w[t] = x * idf
		out.norm += out.w[t] * out.w[t]
	}
	out.norm = math.Sqrt(out.norm)
	return out
}

// Classify implements activities.IntentClassifier (the model is not used).
func (c *Intents) Classify(_ context.Context, _, question string, recent []string) (string, float64, error) {
	label, p := c.Guess(question, recent)
	return label, p, nil
}

// Guess returns the most likely label of question and its probability,
// given the recent intents (oldest first).
func (c *Intents) Guess(question string, recent []string) (string, float64) {
	q := strings.TrimSpace(question)
	scores := make([]float64, len(c.Labels))
	qv := c.weigh(terms(q))
	for i, vs := range c.vecs {
		for _, v := range vs {
			scores[i] = max(scores[i], qv.cosine(v))
		}
		switch c.Labels[i].Label {
		case IntentQA:
			scores[i] += qaPrior
		case IntentChitchat:
			if q != "" && isSmallTalk(q) {
				scores[i] = max(scores[i], 1)
			}
		}
		if n := len(recent); n > 0 {
			scores[i] += historyWeight * float64(countOf(recent, c.Labels[i].Label)) / float64(n)
		}
	}
	best := 0
	var sum float64
	for i, s := range scores {
		sum += math.Exp(intentSharpness * (s - scores[0]))
		if s > scores[best] {
			best = i
		}
	}
	return c.Labels[best].Label, math.Exp(intentSharpness*(scores[best]-scores[0])) / sum
}

func countOf(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// terms is the bag of text's terms: lower-cased words (stemmed), and for
// Chinese each character and each pair of adjacent characters.
func terms(text string) termVec {
	v := termVec{w: map[string]float64{}}
	for _, t := range scan(text) {
		switch t.kind {
		case tokWord:
			v.w[stem(strings.ToLower(t.text))]++
		case tokCJK:
			rs := []rune(t.text)
			for i, r := range rs {
				v.w[string(r)] += 0.5
				if i+1 < len(rs) {
					v.w[string(rs[i:i+2])]++
				}
			}
		}
	}
	if strings.ContainsAny(text, "?？") {
		v.w["?"]++
	}
	for _, x := range v.w {
		v.norm += x * x
	}
	v.norm = math.Sqrt(v.norm)
	return v
}

// cosine is the cosine similarity of two bags (0 when either is empty).
func (a termVec) cosine(b termVec) float64 {
	if a.norm == 0 || b.norm == 0 {
		return 0
	}
	if len(b.w) < len(a.w) {
		a, b = b, a
	}
	var dot float64
	for t, x := range a.w {
		dot += x * b.w[t]
	}
	return dot / (a.norm * b.norm)
}

// Names are the labels' names, in order.
func (c *Intents) Names() []string {
	out := make([]string, len(c.Labels))
	for i, l := range c.Labels {
		out[i] = l.Label
	}
	return slices.Clip(out)
}
