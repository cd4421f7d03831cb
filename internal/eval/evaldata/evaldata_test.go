package evaldata

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestTokens(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"When did they disband?", []string{"when", "did", "they", "disband"}},
		{"  Zappa's band, (the Mothers)!  ", []string{"zappa's", "band", "the", "mothers"}},
		{"200 Alester Ave. in the U.S.", []string{"200", "alester", "ave", "in", "the", "u.s"}},
		{"它多少钱？", []string{"它", "多", "少", "钱"}},
		{"华为Mate60的价格", []string{"华", "为", "mate60", "的", "价", "格"}},
		{"東京タワー 서울", []string{"東", "京", "タ", "ワ", "ー", "서", "울"}},
		{"— ... ？", nil},
		{"", nil},
	} {
		if got := Tokens(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Tokens(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTokenF1(t *testing.T) {
	for _, tc := range []struct {
		got, want string
		f1        float64
	}{
		{"When did they disband?", "when did they disband", 1},
		{"When did they disband?", "When did Zappa and the Mothers of Invention disband?", 2 * (3.0 / 4) * (3.0 / 9) / (3.0/4 + 3.0/9)},
		{"the the cat", "the cat", 2 * (2.0 / 3) * 1 / (2.0/3 + 1)}, // a repeated token counts once per gold copy
		{"dog", "cat", 0},
		{"", "", 1},
		{"", "cat", 0},
		{"cat", "?", 0},
		{"它多少钱？", "华为Mate60多少钱？", 2 * (3.0 / 4) * (3.0 / 6) / (3.0/4 + 3.0/6)},
		{"你说一整瓶安眠药全吞进去", "你说一整瓶安眠药全吞进去。", 1},
	} {
		if got := TokenF1(tc.got, tc.want); math.Abs(got-tc.f1) > 1e-9 {
			t.Errorf("TokenF1(%q, %q) = %v, want %v", tc.got, tc.want, got, tc.f1)
		}
	}
}

func TestSame(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"How about Italian?", "how about  italian", true},
		{"I am looking for a German restaurant. ", "I am looking for a German restaurant.", true},
		{"它多少钱？", "它多少钱", true},
		{"它多少钱？", "华为Mate60多少钱？", false},
		{"How about Italian?", "How about Italian restaurants?", false},
	} {
		if got := Same(tc.a, tc.b); got != tc.same {
			t.Errorf("Same(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}

// write writes a file under dir and returns its path.
func write(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const goodLine = `{"id":"c1","lang":"en","history":[{"role":"user","content":"Tell me about the Pixel 8"}],"question":"How much is it?","gold_rewrite":"How much is the Pixel 8?"}`

// A malformed line fails the read with the file, its line and why.
func TestReadCasesMalformed(t *testing.T) {
	for _, tc := range []struct {
		name, line, reason string
	}{
		{"syntax", `{"id":"c2",`, "unexpected end of JSON input"},
		{"not an object", `["c2"]`, "cannot unmarshal array"},
		{"wrong type", `{"id":"c2","question":7,"gold_rewrite":"x"}`, "cannot unmarshal number"},
		{"no question", `{"id":"c2","question":" ","gold_rewrite":"x"}`, "no question"},
		{"no gold rewrite", `{"id":"c2","question":"x"}`, "no gold_rewrite"},
		{"bad role", `{"id":"c2","question":"x","gold_rewrite":"x","history":[{"role":"bot","content":"hi"}]}`, `history[0]: role "bot"`},
		{"passage without id", `{"id":"c2","question":"x","gold_rewrite":"x","passages":[{"text":"hi"}]}`, "passages[0]: passage without an id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := write(t, t.TempDir(), "s/cases.jsonl", goodLine+"\n\n"+tc.line+"\n"+goodLine+"\n")
			_, err := ReadCases(p)
			if err == nil || !strings.HasPrefix(err.Error(), p+":3: ") || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("ReadCases = %v, want %s:3: …%s…", err, p, tc.reason)
			}
		})
	}
	if _, err := ReadCases(filepath.Join(t.TempDir(), "none.jsonl")); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
}

func TestReadCases(t *testing.T) {
	p := write(t, t.TempDir(), "s/cases.jsonl", goodLine+"\n"+
		`{"id":"c2","topic":"Frank Zappa / Disbandment","history":[],"question":"What group disbanded?","gold_rewrite":"What group disbanded?","alt_rewrites":["Which group disbanded?"],"gold_answer":"the Mothers","extra":1}`+"\n")
	cases, err := ReadCases(p)
	if err != nil || len(cases) != 2 {
		t.Fatalf("ReadCases = %d cases, %v", len(cases), err)
	}
	c := cases[1]
	if c.GoldAnswer != "the Mothers" || len(c.AltRewrites) != 1 {
		t.Errorf("case %+v", c)
	}
	// A CANARD case's history starts with its article's title.
	if m := c.Messages(); len(m) != 1 || m[0].Content != "Frank Zappa" || m[0].Role != "user" {
		t.Errorf("Messages = %+v", m)
	}
	if m := cases[0].Messages(); len(m) != 1 || m[0].Content != "Tell me about the Pixel 8" {
		t.Errorf("Messages = %+v", m)
	}
}

// The corpus is the sibling passages.jsonl and the inline passages, each
// id once.
func TestCorpus(t *testing.T) {
	dir := t.TempDir()
	cases := []Case{
		{ID: "a", Passages: []Passage{{ID: "p2", Text: "inline two"}, {ID: "p3", Text: "three"}}},
		{ID: "b", Passages: []Passage{{ID: "p3", Text: "three again"}}},
	}
	got, err := Corpus(filepath.Join(dir, "cases.jsonl"), cases)
	if want := []Passage{{"p2", "inline two"}, {"p3", "three"}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("inline only: %v, %v; want %v", got, err, want)
	}
	write(t, dir, "passages.jsonl", `{"id":"p1","text":"one"}`+"\n"+`{"id":"p2","text":"two"}`+"\n")
	got, err = Corpus(filepath.Join(dir, "cases.jsonl"), cases)
	if want := []Passage{{"p1", "one"}, {"p2", "two"}, {"p3", "three"}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("with passages.jsonl: %v, %v; want %v", got, err, want)
	}
	if got, err := Corpus(filepath.Join(dir, "cases.jsonl"), nil); err != nil || len(got) != 2 {
		t.Errorf("no inline passages: %v, %v", got, err)
	}
	write(t, dir, "passages.jsonl", `{"id":"p1","text":"one"}`+"\n"+`{"text":"no id"}`+"\n")
	if _, err := Corpus(filepath.Join(dir, "cases.jsonl"), nil); err == nil || !strings.Contains(err.Error(), "passages.jsonl:2: passage without an id") {
		t.Errorf("a malformed passages.jsonl: %v", err)
	}
}

func TestSetName(t *testing.T) {
	for in, want := range map[string]string{
		"../shared/evaldata/canard/cases.jsonl": "canard",
		"mtrag/cases.jsonl":                     "mtrag",
		"testdata/eval/zh.jsonl":                "zh",
		"cases.jsonl":                           "evaldata", // this folder's
	} {
		if got := SetName(in); got != want {
			t.Errorf("SetName(%q) = %q, want %q", in, got, want)
		}
	}
}
