package convo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

type wireOut struct {
	ID         string          `json:"id"`
	ParentID   *string         `json:"parentId"`
	Type       Role            `json:"type"`
	Content    string          `json:"content"`
	Timestamp  json.RawMessage `json:"timestamp,omitempty"`
	Metadata   any             `json:"metadata,omitempty"`
	Tokens     int             `json:"tokens,omitempty"`
	ToolCall   *ToolCall       `json:"toolCall,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
}

type wireIn struct {
	ID         *string                    `json:"id"`
	ParentID   *string                    `json:"parentId"`
	Type       string                     `json:"type"`
	Content    *string                    `json:"content"`
	Timestamp  json.RawMessage            `json:"timestamp"`
	Metadata   map[string]json.RawMessage `json:"metadata"`
	Tokens     int                        `json:"tokens"`
	ToolCall   *ToolCall                  `json:"toolCall"`
	ToolCallID string                     `json:"toolCallId"`
}

// MarshalEntry encodes m as one JSONL entry, without the trailing newline.
// It fails on a message that breaks [Message.Validate].
func MarshalEntry(m Message) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("marshal entry: %w", err)
	}
	w := wireOut{ID: m.ID, Type: m.Role, Content: m.Content, Tokens: m.Tokens, ToolCall: m.ToolCall, ToolCallID: m.ToolCallID}
	if m.ParentID != "" {
		p := m.ParentID
		w.ParentID = &p
	}
	if !m.CreatedAt.IsZero() {
		ts, err := formatTimestamp(m.CreatedAt)
		if err != nil {
			return nil, fmt.Errorf("marshal entry %q: %w", m.ID, err)
		}
		w.Timestamp = json.RawMessage(ts)
	}
	if m.Meta != nil {
		w.Metadata = m.Meta
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, fmt.Errorf("marshal entry %q: %w", m.ID, err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// UnmarshalEntry decodes one JSONL entry. Errors wrap [ErrMalformedEntry]
// (not a JSON entry of the expected shape) or [ErrInvalidMessage].
func UnmarshalEntry(line []byte) (Message, error) {
	var w wireIn
	if err := json.Unmarshal(line, &w); err != nil {
		return Message{}, fmt.Errorf("%w: %w", ErrMalformedEntry, err)
	}
	if w.ID == nil {
		return Message{}, fmt.Errorf("%w: missing id", ErrMalformedEntry)
	}
	m := Message{ID: *w.ID, Role: Role(w.Type), Tokens: w.Tokens, ToolCall: w.ToolCall, ToolCallID: w.ToolCallID}
	if w.ParentID != nil {
		m.ParentID = *w.ParentID
	}
	if w.Content == nil {
		return Message{}, fmt.Errorf("%w: entry %q: missing content", ErrMalformedEntry, m.ID)
	}
	m.Content = *w.Content
	if !m.Role.Valid() {
		return Message{}, fmt.Errorf("%w: entry %q: unknown type %q", ErrMalformedEntry, m.ID, w.Type)
	}
	ts, err := parseTimestamp(w.Timestamp)
	if err != nil {
		return Message{}, fmt.Errorf("%w: entry %q: timestamp: %w", ErrMalformedEntry, m.ID, err)
	}
	m.CreatedAt = ts
	if w.Metadata != nil {
		m.Meta = make(map[string]string, len(w.Metadata))
		for k, raw := range w.Metadata {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				m.Meta[k] = s
				continue
			}
			var b bytes.Buffer
			if err := json.Compact(&b, raw); err != nil {
				return Message{}, fmt.Errorf("%w: entry %q: metadata %q: %w", ErrMalformedEntry, m.ID, k, err)
			}
			m.Meta[k] = b.String()
		}
	}
	if m.ToolCall != nil && len(m.ToolCall.Args) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, m.ToolCall.Args); err != nil {
			return Message{}, fmt.Errorf("%w: entry %q: tool args: %w", ErrMalformedEntry, m.ID, err)
		}
		m.ToolCall.Args = json.RawMessage(b.Bytes())
	}
	if err := upgradeSeedTools(&m); err != nil {
		return Message{}, err
	}
	if err := m.Validate(); err != nil {
		return Message{}, err
	}
	return m, nil
}

// upgradeSeedTools fills the tool fields of seed-format entries.
func upgradeSeedTools(m *Message) error {
	if m.Role == RoleToolCall && m.ToolCall == nil {
		var seed struct {
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal([]byte(m.Content), &seed); err != nil || seed.Name == "" {
			return fmt.Errorf("%w: entry %q: tool_call without toolCall and without seed content {\"name\",\"input\"}", ErrMalformedEntry, m.ID)
		}
		tc := &ToolCall{ID: m.ID, Name: seed.Name}
		if len(seed.Input) > 0 {
			var b bytes.Buffer
			_ = json.Compact(&b, seed.Input) // valid: it was just decoded
			tc.Args = json.RawMessage(b.Bytes())
		}
		m.ToolCall, m.Content = tc, ""
	}
	if m.Role == RoleToolResult && m.ToolCallID == "" {
		m.ToolCallID = m.ParentID
	}
	return nil
}

// EncodeJSONL writes msgs as a JSONL session file (seed 004), one entry per
// line:
//
//	{"id":"3","parentId":"2","type":"user","content":"How are you?","timestamp":1700000000123,"metadata":{...}}
//
// type is the message role: system, user, assistant, tool_call, tool_result
// or summary. parentId is null for a root. timestamp is milliseconds since
// the Unix epoch, with a decimal fraction when the time has sub-millisecond
// precision (decoded times are UTC). metadata values are strings. Fields
// beyond the seed's: tokens (the stored token count), toolCall {id,name,args}
// and toolCallId.
//
// Seed files without those fields decode too: a tool_call's content
// {"name":...,"input":...} becomes its ToolCall (with the entry id as call
// id and empty Content), a tool_result answers the call named by its
// parentId, and non-string metadata values keep their JSON text.
//
// For a message that passes [Message.Validate] with UTF-8 text, UTC
// CreatedAt (or zero) and compact JSON tool arguments, decoding what
// [MarshalEntry] wrote gives the message back unchanged.
func EncodeJSONL(w io.Writer, msgs []Message) error {
	bw := bufio.NewWriter(w)
	for i := range msgs {
		b, err := MarshalEntry(msgs[i])
		if err != nil {
			return fmt.Errorf("encode jsonl: message %d: %w", i, err)
		}
		bw.Write(b)
		bw.WriteByte('\n')
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("encode jsonl: %w", err)
	}
	return nil
}

// DecodeJSONL reads a session file, skipping blank lines, and returns its
// messages in file order. It rejects, naming the line: malformed entries,
// duplicate ids ([ErrDuplicateID]), parents that appear nowhere in the file
// ([ErrMissingParent]) and parent cycles ([ErrCycle]). Parents may come
// after their children.
func DecodeJSONL(r io.Reader) ([]Message, error) {
	br := bufio.NewReader(r)
	var msgs []Message
	var lines []int
	lineOf := make(map[string]int)
	for lineNo := 1; ; lineNo++ {
		line, readErr := br.ReadBytes('\n')
		if readErr != nil && !errors.Is(readErr, io.EOF) {
			return nil, fmt.Errorf("decode jsonl: line %d: %w", lineNo, readErr)
		}
		if lineNo == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			m, err := UnmarshalEntry(t)
			if err != nil {
				return nil, fmt.Errorf("decode jsonl: line %d: %w", lineNo, err)
			}
			if prev, dup := lineOf[m.ID]; dup {
				return nil, fmt.Errorf("decode jsonl: line %d: id %q already used on line %d: %w", lineNo, m.ID, prev, ErrDuplicateID)
			}
			lineOf[m.ID] = lineNo
			msgs = append(msgs, m)
			lines = append(lines, lineNo)
		}
		if readErr != nil {
			break
		}
	}
	if err := checkLinks(msgs, lines, lineOf); err != nil {
		return nil, fmt.Errorf("decode jsonl: %w", err)
	}
	return msgs, nil
}

// checkLinks rejects missing parents and parent cycles in O(n).
func checkLinks(msgs []Message, lines []int, lineOf map[string]int) error {
	pos := make(map[string]int, len(msgs))
	for i := range msgs {
		pos[msgs[i].ID] = i
	}
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]uint8, len(msgs))
	var path []int
	for i := range msgs {
		x := i
		for state[x] == unseen {
			state[x] = onPath
			path = append(path, x)
			pid := msgs[x].ParentID
			if pid == "" {
				break
			}
			p, ok := pos[pid]
			if !ok {
				return fmt.Errorf("line %d: entry %q: parent %q: %w", lines[x], msgs[x].ID, pid, ErrMissingParent)
			}
			if state[p] == onPath {
				return fmt.Errorf("line %d: entry %q: parent %q (line %d) leads back to it: %w", lines[x], msgs[x].ID, pid, lineOf[pid], ErrCycle)
			}
			x = p
		}
		for _, y := range path {
			state[y] = done
		}
		path = path[:0]
	}
	return nil
}

// maxTimestampSec keeps sec*1000 inside int64.
const maxTimestampSec = math.MaxInt64/1000 - 1

// formatTimestamp writes t as milliseconds since the epoch, with a decimal
// fraction for sub-millisecond precision: exact to the nanosecond.
func formatTimestamp(t time.Time) (string, error) {
	sec, nsec := t.Unix(), int64(t.Nanosecond())
	if sec > maxTimestampSec || sec < -maxTimestampSec {
		return "", fmt.Errorf("time %v out of range", t)
	}
	ms := sec*1000 + nsec/1_000_000
	sub := nsec % 1_000_000
	if sub == 0 {
		return strconv.FormatInt(ms, 10), nil
	}
	sign := ""
	if ms < 0 { // value = ms + sub/1e6 = -((-ms-1) + (1e6-sub)/1e6)
		sign, ms, sub = "-", -ms-1, 1_000_000-sub
	}
	frac := strings.TrimRight(fmt.Sprintf("%06d", sub), "0")
	return fmt.Sprintf("%s%d.%s", sign, ms, frac), nil
}

// parseTimestamp reads a timestamp written by formatTimestamp, any JSON
// number of milliseconds, an RFC 3339 string, null or nothing (zero time).
func parseTimestamp(raw json.RawMessage) (time.Time, error) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || s == "null" {
		return time.Time{}, nil
	}
	if s[0] == '"' {
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return time.Time{}, err
		}
		t, err := time.Parse(time.RFC3339Nano, str)
		if err != nil {
			return time.Time{}, err
		}
		return t.UTC(), nil
	}
	neg := strings.HasPrefix(s, "-")
	digits := strings.TrimPrefix(s, "-")
	intPart, fracPart, hasFrac := strings.Cut(digits, ".")
	if !isDigits(intPart) || (hasFrac && !isDigits(fracPart)) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || math.Abs(f) > 9e15 {
			return time.Time{}, fmt.Errorf("not a millisecond count: %s", s)
		}
		return time.UnixMicro(int64(math.Round(f * 1000))).UTC(), nil
	}
	ms, err := strconv.ParseInt(intPart, 10, 64)
	if err != nil || ms/1000 > maxTimestampSec {
		return time.Time{}, fmt.Errorf("out of range: %s", s)
	}
	var ns int64
	if hasFrac {
		f := (fracPart + "000000")[:6]
		ns, _ = strconv.ParseInt(f, 10, 64) // six digits
	}
	sec, rest := ms/1000, (ms%1000)*1_000_000+ns
	if neg {
		sec, rest = -sec, -rest
	}
	return time.Unix(sec, rest).UTC(), nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
