package ingest

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParsePassages(t *testing.T) {
	doc := "\xef\xbb\xbf" + `{"id": "p1", "text": "Temporal keeps workflow history.", "title": "  Temporal   docs ", "url": "https://temporal.io/ "}` + "\r\n" +
		"\n" +
		`{"id": "p2", "text": "华为Mate60的价格是5999元。", "lang": "zh", "score": 3}` + "\n"
	ps, err := ParsePassages([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []Passage{
		{ID: "p1", Text: "Temporal keeps workflow history.", Title: "Temporal docs", URL: "https://temporal.io/", Line: 1},
		{ID: "p2", Text: "华为Mate60的价格是5999元。", Line: 3},
	}
	if len(ps) != len(want) || ps[0] != want[0] || ps[1] != want[1] {
		t.Errorf("passages = %+v, want %+v", ps, want)
	}
}

func TestParsePassagesErrors(t *testing.T) {
	ok := `{"id":"a","text":"fine"}` + "\n"
	for _, tc := range []struct {
		name, doc string
		line      int
		want      string
	}{
		{"not JSON", ok + "id=a text=b\n", 2, "JSON object"},
		{"truncated", ok + `{"id":"b","text":"x"` + "\n", 2, "invalid JSON"},
		{"two values", ok + `{"id":"b","text":"x"} {"id":"c","text":"y"}`, 2, "invalid JSON"},
		{"array", `["a","b"]`, 1, "JSON object"},
		{"id not a string", ok + `{"id":7,"text":"x"}`, 2, `field "id" is a JSON number, want a string`},
		{"text not a string", `{"id":"b","text":["x"]}`, 1, `field "text" is a JSON array`},
		{"no id", ok + `{"id":"b","text":"x"}` + "\n" + `{"text":"x"}`, 3, `no "id"`},
		{"blank id", `{"id":"  ","text":"x"}`, 1, `no "id"`},
		{"id with a newline", `{"id":"a\nb","text":"x"}`, 1, "control characters"},
		{"id too long", `{"id":"` + strings.Repeat("i", 257) + `","text":"x"}`, 1, "256-byte limit"},
		{"no text", `{"id":"b"}`, 1, `passage "b" has no "text"`},
		{"blank text", `{"id":"b","text":" \n "}`, 1, `no "text"`},
		{"title too long", `{"id":"b","text":"x","title":"` + strings.Repeat("t", 1025) + `"}`, 1, "1024-byte limit"},
		{"url too long", `{"id":"b","text":"x","url":"` + strings.Repeat("u", 2049) + `"}`, 1, "2048-byte limit"},
		{"duplicate id", ok + `{"id":"b","text":"x"}` + "\n" + `{"id":"a","text":"y"}`, 3, `passage id "a" repeats line 1`},
		{"invalid UTF-8", ok + "{\"id\":\"b\",\"text\":\"caf\xe9\"}", 2, "UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePassages([]byte(tc.doc))
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error = %v, want a *LineError", err)
			}
			if le.Line != tc.line || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q (line %d), want line %d mentioning %q", err, le.Line, tc.line, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "line ") {
				t.Errorf("error %q does not start with the line", err)
			}
		})
	}
	for _, empty := range []string{"", "\n\n  \n", "\xef\xbb\xbf"} {
		if _, err := ParsePassages([]byte(empty)); !errors.Is(err, ErrEmptyDocument) {
			t.Errorf("ParsePassages(%q) = %v, want ErrEmptyDocument", empty, err)
		}
	}
}

func TestPassagePieces(t *testing.T) {
	tk := tok(t)
	long := strings.Repeat("Sessions are durable workflows that survive restarts. ", 40)
	doc, err := ParseDocument(".jsonl", []byte(
		`{"id":"p1","text":"Short passage.","title":"Intro","url":"https://example.com/p1"}`+"\n"+
			`{"id":"p2","text":"`+long+`"}`+"\n"+
			`{"id":"p3","text":"Intro\nAlready titled.","title":"Intro"}`))
	if err != nil {
		t.Fatal(err)
	}
	pieces, err := doc.Pieces("docA", tk, ChunkOptions{MaxTokens: 64, Overlap: 8})
	if err != nil {
		t.Fatal(err)
	}
	if len(pieces) < 4 {
		t.Fatalf("%d pieces, want p1, several of p2, p3", len(pieces))
	}
	byPassage := map[string][]Piece{}
	for i, p := range pieces {
		if p.Index != i {
			t.Errorf("piece %d has index %d", i, p.Index)
		}
		if p.Tokens > 64 {
			t.Errorf("piece %s has %d tokens", p.ID, p.Tokens)
		}
		pid := p.Metadata["passage"]
		if !strings.HasPrefix(p.ID, pid+"#") {
			t.Errorf("piece id %q does not derive from passage %q", p.ID, pid)
		}
		byPassage[pid] = append(byPassage[pid], p)
	}
	p1 := byPassage["p1"]
	if len(p1) != 1 || p1[0].Text != "Intro\nShort passage." || p1[0].Metadata["title"] != "Intro" || p1[0].Metadata["url"] != "https://example.com/p1" {
		t.Errorf("p1 = %+v", p1)
	}
	if p2 := byPassage["p2"]; len(p2) < 2 || p2[0].Metadata["title"] != "" || len(p2[0].Metadata) != 1 {
		t.Errorf("p2 = %d pieces, first %+v", len(p2), p2[0])
	}
	if p3 := byPassage["p3"]; len(p3) != 1 || p3[0].Text != "Intro\nAlready titled." {
		t.Errorf("p3 (title already first) = %+v", p3)
	}

	// Stable: the same document gives the same ids; another document with
	// the same passages gives other ids.
	again, _ := doc.Pieces("docA", tk, ChunkOptions{MaxTokens: 64, Overlap: 8})
	other, _ := doc.Pieces("docB", tk, ChunkOptions{MaxTokens: 64, Overlap: 8})
	for i := range pieces {
		if again[i].ID != pieces[i].ID {
			t.Errorf("piece %d: id %q then %q", i, pieces[i].ID, again[i].ID)
		}
		if other[i].ID == pieces[i].ID {
			t.Errorf("piece %d: documents A and B share id %q", i, pieces[i].ID)
		}
	}
}

// The evaluation corpus (the mtrag sample) is a valid passage file.
func TestParsePassagesEvalCorpus(t *testing.T) {
	b, err := os.ReadFile("../../internal/eval/testdata/mtrag/passages.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := ParsePassages(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 62 {
		t.Errorf("%d passages, want 62", len(ps))
	}
}
