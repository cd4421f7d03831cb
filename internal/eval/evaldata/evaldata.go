// Package evaldata reads the evaluation sets' common JSONL format (the one
// of ../shared/evaldata/*/cases.jsonl, described in its README) and scores
// texts against their gold: one tokenizer ([Tokens]) for token F1 and for
// comparing texts up to spaces, punctuation and case.
//
// It imports the standard library and convo only, so that any package's
// tests (lexical's rewrite tests among them) may read the sets with it.
package evaldata

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ctxflow/ctxflow/convo"
)

// Case is one turn of an evaluation set.
type Case struct {
	ID   string `json:"id"`
	Lang string `json:"lang"` // "en" or "zh"
	// Topic is the article and section a CANARD dialog is about
	// ("title / section"); its first question often needs the title.
	Topic       string   `json:"topic,omitempty"`
	History     []Turn   `json:"history"`
	Question    string   `json:"question"`
	GoldRewrite string   `json:"gold_rewrite"`
	AltRewrites []string `json:"alt_rewrites,omitempty"`
	// Phenomenon is what the question leaves out (camrest-gecor:
	// "ellipsis", "coreference", "complete").
	Phenomenon string `json:"phenomenon,omitempty"`
	// Passages are the case's inline passages: the set's closed corpus is
	// their union with a sibling passages.jsonl (see [Corpus]).
	Passages []Passage `json:"passages,omitempty"`
	// GoldPassageIDs name the passages that answer the turn.
	GoldPassageIDs []string `json:"gold_passage_ids,omitempty"`
	// GoldAnswer is the reference answer, in sets that have one.
	GoldAnswer string `json:"gold_answer,omitempty"`
}

// Turn is one message of a case's history.
type Turn struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Passage is one document of a closed corpus.
type Passage struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// Messages is the case's history as a conversation's messages. A case with
// a topic (CANARD) starts with its article's title as a user message, as
// the CANARD history itself begins with it.
func (c Case) Messages() []convo.Message {
	var h []convo.Message
	if c.Topic != "" {
		title, _, _ := strings.Cut(c.Topic, " / ")
		h = append(h, convo.Message{Role: convo.RoleUser, Content: title})
	}
	for _, t := range c.History {
		h = append(h, convo.Message{Role: convo.Role(t.Role), Content: t.Content})
	}
	return h
}

// check reports what makes a case unusable: no question, no gold rewrite,
// a history message with an unknown role.
func (c Case) check() error {
	if strings.TrimSpace(c.Question) == "" {
		return errors.New("no question")
	}
	if strings.TrimSpace(c.GoldRewrite) == "" {
		return errors.New("no gold_rewrite")
	}
	for i, t := range c.History {
		if t.Role != string(convo.RoleUser) && t.Role != string(convo.RoleAssistant) {
			return fmt.Errorf("history[%d]: role %q is neither user nor assistant", i, t.Role)
		}
	}
	for i, p := range c.Passages {
		if err := p.check(); err != nil {
			return fmt.Errorf("passages[%d]: %w", i, err)
		}
	}
	return nil
}

// check reports a passage without an id.
func (p Passage) check() error {
	if p.ID == "" {
		return errors.New("passage without an id")
	}
	return nil
}

// ReadCases reads a set's cases; a malformed line fails with
// "FILE:LINE: reason".
func ReadCases(path string) ([]Case, error) {
	return ReadJSONL(path, Case.check)
}

// ReadPassages reads a passages file ({"id","text"} per line).
func ReadPassages(path string) ([]Passage, error) {
	return ReadJSONL(path, Passage.check)
}

// ReadJSONL reads one T per non-blank line of path, each checked by check
// (nil: none); a line that does not decode or fails its check fails the
// read with "FILE:LINE: reason".
func ReadJSONL[T any](path string, check func(T) error) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if check != nil {
			if err := check(v); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, line, err)
			}
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// Corpus is the closed corpus of the set whose cases were read from
// casesPath: the passages of a passages.jsonl beside it (mtrag), then the
// cases' inline passages not already in it, each id once (its first text).
// A set without either has none.
func Corpus(casesPath string, cases []Case) ([]Passage, error) {
	passages, err := ReadPassages(filepath.Join(filepath.Dir(casesPath), "passages.jsonl"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	seen := make(map[string]bool, len(passages))
	var out []Passage
	add := func(p Passage) {
		if !seen[p.ID] {
			seen[p.ID] = true
			out = append(out, p)
		}
	}
	for _, p := range passages {
		add(p)
	}
	for _, c := range cases {
		for _, p := range c.Passages {
			add(p)
		}
	}
	return out, nil
}

// SetName names the set read from path: the folder's name for a
// cases.jsonl (../shared/evaldata/canard/cases.jsonl is "canard"), else the
// file's name without .jsonl.
func SetName(path string) string {
	if filepath.Base(path) == "cases.jsonl" {
		dir, err := filepath.Abs(filepath.Dir(path))
		if err != nil {
			dir = filepath.Dir(path)
		}
		return filepath.Base(dir)
	}
	return strings.TrimSuffix(filepath.Base(path), ".jsonl")
}
