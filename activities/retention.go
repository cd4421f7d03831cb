package activities

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
)

// Retention is each tenant's retention period (CTXFLOW_RETENTION): a
// session idle longer is erased by the retention sweep. "*" is every
// tenant not named; a tenant without a period (or with 0) keeps its
// sessions.
type Retention map[string]time.Duration

// For is tenant t's period (0: kept for good).
func (r Retention) For(t string) time.Duration {
	if d, ok := r[t]; ok {
		return d
	}
	return r["*"]
}

// SessionSeen is a session and the last time anything happened in it.
type SessionSeen struct {
	Key  SessionKey
	Last time.Time
}

// Expired returns the sessions to erase at now: those whose last activity
// (the latest of their sightings) is older than their tenant's period,
// sorted by tenant and id.
func (r Retention) Expired(now time.Time, seen []SessionSeen) []SessionKey {
	last := map[SessionKey]time.Time{}
	for _, s := range seen {
		if t, ok := last[s.Key]; !ok || s.Last.After(t) {
			last[s.Key] = s.Last
		}
	}
	var out []SessionKey
	for k, t := range last {
		if p := r.For(k.Tenant); p > 0 && now.Sub(t) > p {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b SessionKey) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.SessionID, b.SessionID))
	})
	return out
}

// shortest is the shortest period set (0: none).
func (r Retention) shortest() time.Duration {
	var d time.Duration
	for _, p := range r {
		if p > 0 && (d == 0 || p < d) {
			d = p
		}
	}
	return d
}

// SweepResult is what a retention sweep erased.
type SweepResult struct {
	Erased EraseCounts `json:"erased"`
}

// SweepRetention erases every session idle longer than its tenant's
// retention period: those Temporal lists (the latest run's last update,
// start or close decides) and those only the transcript store still holds
// (its last write decides). Each erased session has its audit line. The
// result holds counts only, so that the sweep's history names no session.
func (a *Eraser) SweepRetention(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	shortest := a.Retention.shortest()
	if shortest == 0 {
		return res, nil
	}
	defer keepAlive(ctx)()
	now := a.now()
	seen, err := a.sessionsSeen(ctx, now.Add(-shortest))
	if err != nil {
		return res, err
	}
	expired := a.Retention.Expired(now, seen)
	for i, k := range expired {
		start := a.now()
		n, err := a.eraseSession(ctx, k)
		if err != nil {
			return res, fmt.Errorf("retention: erase %s: %w", k, err)
		}
		res.Erased.add(n)
		a.audit(EraseRequest{Tenant: k.Tenant, SessionID: k.SessionID, Actor: "retention"}, n, start)
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, i+1)
		}
	}
	if len(expired) > 0 {
		if err := a.scrub(ctx, false); err != nil {
			return res, err
		}
	}
	return res, nil
}

// sessionsSeen lists the sessions that may have been idle since before
// cutoff, with their last activity, from two visibility queries and no
// call per session: the sessions with a run started before cutoff (the
// latest update, start or close of those runs; a run updated since is
// listed with its current CtxUpdatedAt) less those with a run started
// after it (alive), and the sessions only the transcript store holds (its
// last write).
func (a *Eraser) sessionsSeen(ctx context.Context, cutoff time.Time) ([]SessionSeen, error) {
	at := cutoff.UTC().Format(time.RFC3339Nano)
	recent, err := a.list(ctx, fmt.Sprintf("WorkflowType = '%s' AND StartTime >= '%s'", sessionWorkflowType, at))
	if err != nil {
		return nil, err
	}
	alive := map[SessionKey]bool{}
	for _, r := range recent {
		if t, id, ok := parseSessionWorkflowID(r.GetExecution().GetWorkflowId()); ok {
			alive[SessionKey{Tenant: t, SessionID: id}] = true
		}
	}
	old, err := a.list(ctx, fmt.Sprintf("WorkflowType = '%s' AND StartTime < '%s'", sessionWorkflowType, at))
	if err != nil {
		return nil, err
	}
	var out []SessionSeen
	for _, r := range old {
		t, id, ok := parseSessionWorkflowID(r.GetExecution().GetWorkflowId())
		k := SessionKey{Tenant: t, SessionID: id}
		if !ok || alive[k] {
			continue
		}
		last := r.GetStartTime().AsTime()
		if c := r.GetCloseTime(); c != nil && c.AsTime().After(last) {
			last = c.AsTime()
		}
		if p := r.GetSearchAttributes().GetIndexedFields()["CtxUpdatedAt"]; p != nil {
			var u time.Time
			if err := converter.GetDefaultDataConverter().FromPayload(p, &u); err == nil && u.After(last) {
				last = u
			}
		}
		out = append(out, SessionSeen{Key: k, Last: last})
	}
	if l, ok := a.Transcript.(SessionLister); ok {
		stored, err := l.StoredSessions(ctx)
		if err != nil {
			return nil, fmt.Errorf("list stored sessions: %w", err)
		}
		for _, s := range stored {
			k := SessionKey{Tenant: s.Key.Tenant, SessionID: sessionOfKey(s.Key.SessionID)} // a task's is its session's
			if !alive[k] {                                                                  // beside its runs' times, if Temporal lists any: the latest decides
				out = append(out, SessionSeen{Key: k, Last: s.Updated})
			}
		}
	}
	return out, nil
}
