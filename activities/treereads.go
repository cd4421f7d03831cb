package activities

import (
	"context"

	"github.com/ctxflow/ctxflow/convo"
)

// TreeReads answers the [TranscriptStore] calls that only read a session's
// whole tree — Assemble, PlanSummary, All, Grown — over a store's own Read, which
// runs fn on the session's tree as that store keeps it. A store embeds it.
type TreeReads struct {
	Read func(ctx context.Context, k SessionKey, fn func(t *convo.Tree) error) error
}

// Assemble implements [TranscriptStore].
func (r TreeReads) Assemble(ctx context.Context, k SessionKey, leafID string, w convo.WindowConfig, sum convo.SummaryState, fallback int) (c convo.Context, err error) {
	err = r.Read(ctx, k, func(t *convo.Tree) error {
		if fallback > 0 {
			c, err = t.AssembleFallback(leafID, w, fallback)
		} else {
			c, err = t.Assemble(leafID, w, sum)
		}
		return err
	})
	return c, err
}

// PlanSummary implements [TranscriptStore].
func (r TreeReads) PlanSummary(ctx context.Context, k SessionKey, leafID string, w convo.WindowConfig, c convo.SummaryConfig, prev convo.SummaryState) (p convo.SummaryPlan, err error) {
	err = r.Read(ctx, k, func(t *convo.Tree) error {
		p, err = t.PlanSummary(leafID, w, c, prev)
		return err
	})
	return p, err
}

// All returns every message of a session, in the order they were added.
func (r TreeReads) All(ctx context.Context, k SessionKey) (all []convo.Message, err error) {
	err = r.Read(ctx, k, func(t *convo.Tree) error {
		all = t.Messages()
		return nil
	})
	return all, err
}

// Grown returns what grew below a message since it was a leaf.
func (r TreeReads) Grown(ctx context.Context, k SessionKey, id string) (msgs []convo.Message, err error) {
	err = r.Read(ctx, k, func(t *convo.Tree) error {
		msgs = t.Grown(id)
		return nil
	})
	return msgs, err
}
