package workflows

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"

	"github.com/ctxflow/ctxflow/activities"
)

// TurnLedger records every turn id a session has accepted, with a
// fingerprint of its question, for the session's whole life: it travels in
// the working state across continue-as-new and idle snapshots, so that a
// repeated turn id is recognised however old it is (idempotency), and a
// reused id with another question is refused.
//
// It is compact: 12 bytes a turn (a 64-bit hash of the id and a 32-bit hash
// of the question), sorted by id hash, and encoded in JSON as one base64
// string. Two distinct ids collide with probability about n²/2⁶⁵ (1e-11 for
// 10,000 turns).
type TurnLedger struct {
	entries []ledgerEntry // sorted by id
}

type ledgerEntry struct {
	id       uint64
	question uint32
}

const ledgerEntrySize = 12

// Seen reports whether turnID was recorded, and whether with this question.
func (l *TurnLedger) Seen(turnID, question string) (seen, sameQuestion bool) {
	id, q := hashID(turnID), hashQuestion(question)
	i := l.search(id)
	if i < len(l.entries) && l.entries[i].id == id {
		return true, l.entries[i].question == q
	}
	return false, false
}

// Add records turnID with its question; a recorded id keeps its first
// question.
func (l *TurnLedger) Add(turnID, question string) { l.addHashed(turnID, hashQuestion(question)) }

// Len is the number of recorded turns.
func (l *TurnLedger) Len() int { return len(l.entries) }

func (l *TurnLedger) search(id uint64) int {
	return sort.Search(len(l.entries), func(i int) bool { return l.entries[i].id >= id })
}

// MarshalJSON encodes the ledger as a base64 string.
func (l TurnLedger) MarshalJSON() ([]byte, error) {
	b := make([]byte, len(l.entries)*ledgerEntrySize)
	for i, e := range l.entries {
		binary.BigEndian.PutUint64(b[i*ledgerEntrySize:], e.id)
		binary.BigEndian.PutUint32(b[i*ledgerEntrySize+8:], e.question)
	}
	return json.Marshal(base64.RawStdEncoding.EncodeToString(b))
}

// UnmarshalJSON decodes what MarshalJSON wrote.
func (l *TurnLedger) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("turn ledger: %w", err)
	}
	b, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil || len(b)%ledgerEntrySize != 0 {
		return fmt.Errorf("turn ledger: not a ledger (%d bytes, %v)", len(b), err)
	}
	l.entries = make([]ledgerEntry, len(b)/ledgerEntrySize)
	for i := range l.entries {
		l.entries[i] = ledgerEntry{
			id:       binary.BigEndian.Uint64(b[i*ledgerEntrySize:]),
			question: binary.BigEndian.Uint32(b[i*ledgerEntrySize+8:]),
		}
		if i > 0 && l.entries[i-1].id >= l.entries[i].id {
			return fmt.Errorf("turn ledger: entries out of order at %d", i)
		}
	}
	return nil
}

func hashID(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

func hashQuestion(s string) uint32 { return activities.QuestionHash(s) }

// addHashed records a turn whose question is known by its hash (a turn of
// a forked or imported transcript: [activities.QuestionHash]).
func (l *TurnLedger) addHashed(turnID string, q uint32) {
	id := hashID(turnID)
	i := l.search(id)
	if i < len(l.entries) && l.entries[i].id == id {
		return
	}
	l.entries = slices.Insert(l.entries, i, ledgerEntry{id: id, question: q})
}

// IsZero reports an empty ledger (omitted from JSON with omitzero).
func (l TurnLedger) IsZero() bool { return len(l.entries) == 0 }
