package offline

import (
	"context"
	"fmt"
	"strings"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/lexical"
)

var (
	_ activities.Grader       = (*Engine)(nil)
	_ activities.Reformulator = (*Engine)(nil)
)

// Grade implements [activities.Grader] with the lexical [Grade]: the
// confidence is the score's distance from the threshold, so that a borderline
// document is graded with little confidence either way.
func (e *Engine) Grade(ctx context.Context, _, query, document string) (activities.Grade, error) {
	if err := ctx.Err(); err != nil {
		return activities.Grade{}, err
	}
	g := lexical.Grade(query, document)
	conf := g.Score
	if !g.Relevant {
		conf = 1 - g.Score
	}
	return activities.Grade{IsRelevant: g.Relevant, Confidence: conf, Reasoning: g.Reason}, nil
}

// Reformulate implements [activities.Reformulator] without a model: it
// searches again with the question's keywords only (entities first, no
// question or function words), then with its entities only, then with its
// heaviest keyword — the first of those not tried yet. When every form was
// tried it returns the current query unchanged, and says so, so that the
// corrective loop stops instead of repeating a search.
func (e *Engine) Reformulate(ctx context.Context, _ string, req activities.ReformulateRequest) (activities.Reformulation, error) {
	if err := ctx.Err(); err != nil {
		return activities.Reformulation{}, err
	}
	var all, ents []string
	for _, k := range lexical.Keywords(req.Original) {
		if k.Entity {
			ents = append(ents, k.Text)
		}
	}
	all = append(all, ents...)
	for _, k := range lexical.Aspects(req.Original) { // the words no entity covers
		if !k.Entity {
			all = append(all, k.Text)
		}
	}
	tried := map[string]bool{queryForm(req.Original): true, queryForm(req.Current): true}
	for _, h := range req.History {
		tried[queryForm(h.RewrittenQuery)] = true
	}
	candidates := []struct{ query, reason string }{
		{strings.Join(all, " "), "searched with the question's keywords only, without question and function words"},
		{strings.Join(ents, " "), "searched with the question's entities only"},
	}
	if len(all) > 0 {
		candidates = append(candidates, struct{ query, reason string }{all[0], fmt.Sprintf("searched with the main keyword %q alone", all[0])})
	}
	for _, c := range candidates {
		if c.query != "" && !tried[queryForm(c.query)] {
			return activities.Reformulation{RewrittenQuery: c.query, RewriteReason: c.reason, Keywords: all}, nil
		}
	}
	return activities.Reformulation{
		RewrittenQuery: req.Current,
		RewriteReason:  "no other formulation of the question is left to try",
		Keywords:       all,
	}, nil
}

// queryForm is a query's comparison form: lower case, single spaces.
func queryForm(q string) string { return strings.Join(strings.Fields(strings.ToLower(q)), " ") }
