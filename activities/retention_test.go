package activities

import (
	"reflect"
	"testing"
	"time"
)

// TestRetentionExpired: the sweep erases a session when its latest
// sighting is older than its tenant's period ("*" for tenants not named,
// 0 or no period: kept), never one seen recently in any of its runs.
func TestRetentionExpired(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	r := Retention{"*": 30 * day, "acme": 7 * day, "audit": 0}
	key := func(t, s string) SessionKey { return SessionKey{Tenant: t, SessionID: s} }
	seen := []SessionSeen{
		{key("acme", "old"), now.Add(-8 * day)},        // over acme's 7 days
		{key("acme", "fresh"), now.Add(-6 * day)},      // under them
		{key("acme", "revived"), now.Add(-40 * day)},   // an old run…
		{key("acme", "revived"), now.Add(-time.Hour)},  // …and a recent one: kept
		{key("other", "old"), now.Add(-31 * day)},      // over "*"'s 30 days
		{key("other", "young"), now.Add(-29 * day)},    // under them
		{key("audit", "ancient"), now.Add(-900 * day)}, // audit keeps everything
		{key("acme", "edge"), now.Add(-7 * day)},       // exactly the period: kept
	}
	got := r.Expired(now, seen)
	want := []SessionKey{key("acme", "old"), key("other", "old")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Expired = %v, want %v", got, want)
	}
	if got := (Retention{"acme": 7 * day}).Expired(now, seen); !reflect.DeepEqual(got, []SessionKey{key("acme", "old")}) {
		t.Errorf("without *: Expired = %v, want only acme/old (other tenants keep theirs)", got)
	}
	if got := (Retention{}).Expired(now, seen); len(got) != 0 {
		t.Errorf("no retention: Expired = %v, want none", got)
	}
	if d := r.shortest(); d != 7*day {
		t.Errorf("shortest = %v, want 7 days", d)
	}
}

// TestOwnDocument: a tenant's document workflows, by their ids (the
// default tenant's are bare ids).
func TestOwnDocument(t *testing.T) {
	for _, tc := range []struct {
		tenant, wid string
		want        bool
	}{
		{"acme", "ingest/acme/faq", true},
		{"acme", "ingest/acmex/faq", false},
		{"acme", "ingest/faq", false},
		{DefaultTenant, "ingest/faq", true},
		{DefaultTenant, "ingest/acme/faq", false},
		{"acme", "session/acme/faq", false},
	} {
		if got := ownDocument(tc.tenant, tc.wid); got != tc.want {
			t.Errorf("ownDocument(%q, %q) = %v, want %v", tc.tenant, tc.wid, got, tc.want)
		}
	}
}
