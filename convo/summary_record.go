package convo

import (
	"fmt"
	"strconv"
	"time"
)

// Meta keys of a RoleSummary record (see [SummaryRecord]).
const (
	MetaSummaryThrough  = "summaryThrough"
	MetaSummaryFolded   = "summaryFolded"
	MetaSummaryPathHash = "summaryPathHash"
	MetaSummaryKey      = "summaryKey"
	MetaSummaryTokens   = "summaryTokens"
)

// SummaryRecord is the compaction record of s for the transcript: a
// RoleSummary message (type "summary" in JSONL) with id and parent given,
// Content = s.Text, and the rest of s in Meta. Appended on the active branch
// it costs nothing in the model view, and [Tree.LastSummary] plus
// [SummaryFromRecord] revive the running summary after a restart.
func SummaryRecord(id, parentID string, at time.Time, s SummaryState) Message {
	return Message{
		ID: id, ParentID: parentID, Role: RoleSummary, Content: s.Text, CreatedAt: at,
		Meta: map[string]string{
			MetaSummaryThrough:  s.Through,
			MetaSummaryFolded:   strconv.Itoa(s.Folded),
			MetaSummaryPathHash: s.PathHash,
			MetaSummaryKey:      s.Key,
			MetaSummaryTokens:   strconv.Itoa(s.Tokens),
		},
	}
}

// SummaryFromRecord reads back the state stored by [SummaryRecord]. It fails
// (wrapping [ErrInvalidMessage]) on any other message.
func SummaryFromRecord(m Message) (SummaryState, error) {
	bad := func(what string) error {
		return fmt.Errorf("summary record %q: %s: %w", m.ID, what, ErrInvalidMessage)
	}
	if m.Role != RoleSummary {
		return SummaryState{}, bad("role is " + string(m.Role))
	}
	folded, err := strconv.Atoi(m.Meta[MetaSummaryFolded])
	if err != nil || folded < 1 {
		return SummaryState{}, bad("bad " + MetaSummaryFolded)
	}
	tokens, err := strconv.Atoi(m.Meta[MetaSummaryTokens])
	if err != nil || tokens < 0 {
		return SummaryState{}, bad("bad " + MetaSummaryTokens)
	}
	s := SummaryState{
		Text: m.Content, Tokens: tokens, Folded: folded,
		Through: m.Meta[MetaSummaryThrough], PathHash: m.Meta[MetaSummaryPathHash], Key: m.Meta[MetaSummaryKey],
	}
	if s.Through == "" || s.PathHash == "" {
		return SummaryState{}, bad("missing through or path hash")
	}
	return s, nil
}
