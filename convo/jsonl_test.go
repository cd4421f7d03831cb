package convo

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// seedSession is seed 004's example file, with a tool call and result in the
// seed's own encoding.
const seedSession = `{"id":"1","parentId":null,"type":"user","content":"Hello","timestamp":1700000000000}
{"id":"2","parentId":"1","type":"assistant","content":"Hi!","timestamp":1700000001000}

{"id":"3","parentId":"2","type":"tool_call","content":"{\"name\":\"search\",\"input\":{\"q\": \"mate 60\"}}","timestamp":1700000002000,"metadata":{"step":3,"model":"qwen"}}
{"id":"4","parentId":"3","type":"tool_result","content":"found 2 docs","timestamp":1700000003000}
`

func TestDecodeSeedFormat(t *testing.T) {
	msgs, err := DecodeJSONL(strings.NewReader(seedSession))
	if err != nil {
		t.Fatal(err)
	}
	want := []Message{
		{ID: "1", Role: RoleUser, Content: "Hello", CreatedAt: time.UnixMilli(1700000000000).UTC()},
		{ID: "2", ParentID: "1", Role: RoleAssistant, Content: "Hi!", CreatedAt: time.UnixMilli(1700000001000).UTC()},
		{ID: "3", ParentID: "2", Role: RoleToolCall, CreatedAt: time.UnixMilli(1700000002000).UTC(),
			ToolCall: &ToolCall{ID: "3", Name: "search", Args: json.RawMessage(`{"q":"mate 60"}`)},
			Meta:     map[string]string{"step": "3", "model": "qwen"}},
		{ID: "4", ParentID: "3", Role: RoleToolResult, Content: "found 2 docs", ToolCallID: "3", CreatedAt: time.UnixMilli(1700000003000).UTC()},
	}
	if !reflect.DeepEqual(msgs, want) {
		t.Errorf("got  %+v\nwant %+v", msgs, want)
	}
	tr, err := buildTree(msgs)
	if err != nil {
		t.Fatalf("seed file does not build a tree: %v", err)
	}
	mm, err := tr.Branch("4")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ToModelMessages(mm); err != nil {
		t.Errorf("seed branch has no model view: %v", err)
	}
}

func TestDecodeJSONLErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     error
		line     string
	}{
		{"not json", "{\"id\":\"1\",\"type\":\"user\",\"content\":\"a\"}\nnope\n", ErrMalformedEntry, "line 2"},
		{"missing id", `{"type":"user","content":"a"}`, ErrMalformedEntry, "line 1"},
		{"unknown type", `{"id":"1","type":"bot","content":"a"}`, ErrMalformedEntry, "line 1"},
		{"missing content", `{"id":"1","type":"user"}`, ErrMalformedEntry, "line 1"},
		{"bad timestamp", `{"id":"1","type":"user","content":"a","timestamp":"yesterday"}`, ErrMalformedEntry, "line 1"},
		{"seed tool_call without name", `{"id":"1","type":"tool_call","content":"{}"}`, ErrMalformedEntry, "line 1"},
		{"empty id", `{"id":"","type":"user","content":"a"}`, ErrInvalidMessage, "line 1"},
		{"duplicate id", "{\"id\":\"1\",\"type\":\"user\",\"content\":\"a\"}\n\n{\"id\":\"1\",\"type\":\"user\",\"content\":\"b\"}", ErrDuplicateID, "line 3"},
		{"missing parent", `{"id":"1","parentId":"0","type":"user","content":"a"}`, ErrMissingParent, "line 1"},
		{"cycle", "{\"id\":\"a\",\"parentId\":\"b\",\"type\":\"user\",\"content\":\"\"}\n{\"id\":\"b\",\"parentId\":\"a\",\"type\":\"user\",\"content\":\"\"}", ErrCycle, "line"},
		{"self parent", `{"id":"a","parentId":"a","type":"user","content":""}`, ErrCycle, "line 1"},
		{"trailing garbage", `{"id":"1","type":"user","content":"a"} x`, ErrMalformedEntry, "line 1"},
	}
	for _, tt := range tests {
		_, err := DecodeJSONL(strings.NewReader(tt.in))
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.line) {
			t.Errorf("%s: err = %v, want %v mentioning %q", tt.name, err, tt.want, tt.line)
		}
	}
}

func TestEntryTimestamps(t *testing.T) {
	times := []time.Time{
		time.Unix(1700000000, 123456789).UTC(),
		time.Unix(-1, 999_500_000).UTC(), // -0.5 ms
		time.Unix(-86400*365*70, 1).UTC(),
		time.Unix(0, 0).UTC(),
		time.Date(2262, 1, 1, 0, 0, 0, 5, time.UTC),
	}
	for _, ts := range times {
		m := Message{ID: "1", Role: RoleUser, Content: "x", CreatedAt: ts}
		b, err := MarshalEntry(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := UnmarshalEntry(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !got.CreatedAt.Equal(ts) {
			t.Errorf("%v -> %s -> %v", ts, b, got.CreatedAt)
		}
	}
	for in, want := range map[string]time.Time{
		`"2024-01-02T03:04:05.5Z"`: time.Date(2024, 1, 2, 3, 4, 5, 5e8, time.UTC),
		`1.7e12`:                   time.UnixMilli(1.7e12).UTC(),
		`null`:                     {},
	} {
		got, err := UnmarshalEntry([]byte(`{"id":"1","type":"user","content":"","timestamp":` + in + `}`))
		if err != nil || !got.CreatedAt.Equal(want) {
			t.Errorf("timestamp %s: %v, %v; want %v", in, got.CreatedAt, err, want)
		}
	}
}

func TestMarshalEntryShape(t *testing.T) {
	m := Message{ID: "2", ParentID: "1", Role: RoleUser, Content: "a<b", Tokens: 7, CreatedAt: time.UnixMilli(5).UTC(), Meta: map[string]string{"k": "v"}}
	b, err := MarshalEntry(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"2","parentId":"1","type":"user","content":"a<b","timestamp":5,"metadata":{"k":"v"},"tokens":7}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	root, _ := MarshalEntry(Message{ID: "1", Role: RoleSystem, Content: ""})
	if want := `{"id":"1","parentId":null,"type":"system","content":""}`; string(root) != want {
		t.Errorf("root: got %s, want %s", root, want)
	}
	if _, err := MarshalEntry(Message{ID: "1", Role: RoleToolCall}); !errors.Is(err, ErrInvalidMessage) {
		t.Errorf("invalid message marshalled: %v", err)
	}
}

func TestEncodeDecodeTree(t *testing.T) {
	msgs := spec(t, "s10 u10 c10 r10 x0 a10 u10")
	var buf bytes.Buffer
	if err := EncodeJSONL(&buf, msgs); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, msgs) {
		t.Errorf("round trip changed the messages:\n%+v\n%+v", got, msgs)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestEncodeJSONLWriteError(t *testing.T) {
	if err := EncodeJSONL(failWriter{}, spec(t, "u1")); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("err = %v", err)
	}
}

// FuzzDecodeJSONL checks that the decoder never panics, and that whatever it
// accepts re-encodes and decodes to the same messages. Seed corpus:
// testdata/fuzz/FuzzDecodeJSONL.
func FuzzDecodeJSONL(f *testing.F) {
	f.Add([]byte(seedSession))
	f.Add([]byte(`{"id":"1","parentId":null,"type":"system","content":"be brief","tokens":5}`))
	f.Add([]byte("{\"id\":\"a\",\"parentId\":\"b\",\"type\":\"user\",\"content\":\"\"}\n{\"id\":\"b\",\"parentId\":\"a\",\"type\":\"user\",\"content\":\"\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, err := DecodeJSONL(bytes.NewReader(data))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := EncodeJSONL(&buf, msgs); err != nil {
			t.Fatalf("decoded messages do not encode: %v", err)
		}
		again, err := DecodeJSONL(&buf)
		if err != nil {
			t.Fatalf("re-decode: %v\n%s", err, buf.Bytes())
		}
		if !reflect.DeepEqual(normalizeTimes(again), normalizeTimes(msgs)) {
			t.Fatalf("re-decode differs:\n%+v\n%+v", again, msgs)
		}
		if tr, err := buildTree(msgs); err == nil {
			for _, leaf := range tr.leaves() {
				_, _ = tr.Window(leaf, DefaultWindowConfig())
			}
		}
	})
}

// normalizeTimes compares instants, not representations.
func normalizeTimes(msgs []Message) []Message {
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		if !m.CreatedAt.IsZero() {
			m.CreatedAt = time.Unix(0, m.CreatedAt.UnixNano()).UTC()
		}
		out[i] = m
	}
	return out
}
