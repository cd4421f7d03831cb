package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Passage is one line of a JSONL document:
//
//	{"id": "p1", "text": "…", "title": "…", "url": "…"}
//
// id and text are required, title and url optional; other fields are
// ignored.
type Passage struct {
	ID    string `json:"id"`
	Text  string `json:"text"`
	Title string `json:"title,omitempty"`
	URL   string `json:"url,omitempty"`
	// Line is the passage's line number in its file, from 1.
	Line int `json:"-"`
}

// Limits of a passage's fields, in bytes.
const (
	MaxPassageIDBytes    = 256
	MaxPassageTitleBytes = 1024
	MaxPassageURLBytes   = 2048
)

// LineError is an error in one line of a JSONL document.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ParsePassages parses a JSONL document of passages. Blank lines are
// skipped; a UTF-8 byte order mark and CRLF line ends are accepted. The
// first bad line fails the whole document with a [*LineError] that names
// it: invalid JSON or UTF-8, a field of the wrong type, a missing id or
// text, an id repeated from an earlier line, a field over its limit.
func ParsePassages(b []byte) ([]Passage, error) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	var out []Passage
	seen := map[string]int{}
	for n := 1; len(b) > 0; n++ {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		p, err := parsePassage(line)
		if err != nil {
			return nil, &LineError{Line: n, Err: err}
		}
		if first, dup := seen[p.ID]; dup {
			return nil, &LineError{Line: n, Err: fmt.Errorf("passage id %q repeats line %d", p.ID, first)}
		}
		seen[p.ID] = n
		p.Line = n
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no passages: %w", ErrEmptyDocument)
	}
	return out, nil
}

func parsePassage(line []byte) (Passage, error) {
	var p Passage
	if !utf8.Valid(line) {
		return p, errors.New("not valid UTF-8")
	}
	if line[0] != '{' {
		return p, errors.New(`want a JSON object like {"id": "…", "text": "…"}`)
	}
	if err := json.Unmarshal(line, &p); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return p, fmt.Errorf("field %q is a JSON %s, want a string", typeErr.Field, typeErr.Value)
		}
		return p, fmt.Errorf("invalid JSON: %w", err)
	}
	switch {
	case strings.TrimSpace(p.ID) == "":
		return p, errors.New(`no "id"`)
	case len(p.ID) > MaxPassageIDBytes:
		return p, fmt.Errorf(`"id" is %d bytes, over the %d-byte limit`, len(p.ID), MaxPassageIDBytes)
	case strings.ContainsFunc(p.ID, unicode.IsControl):
		return p, fmt.Errorf(`"id" %q holds control characters`, p.ID)
	case strings.TrimSpace(p.Text) == "":
		return p, fmt.Errorf(`passage %q has no "text"`, p.ID)
	case len(p.Title) > MaxPassageTitleBytes:
		return p, fmt.Errorf(`"title" of passage %q is %d bytes, over the %d-byte limit`, p.ID, len(p.Title), MaxPassageTitleBytes)
	case len(p.URL) > MaxPassageURLBytes:
		return p, fmt.Errorf(`"url" of passage %q is %d bytes, over the %d-byte limit`, p.ID, len(p.URL), MaxPassageURLBytes)
	}
	p.Title = strings.Join(strings.Fields(p.Title), " ")
	p.URL = strings.TrimSpace(p.URL)
	return p, nil
}
