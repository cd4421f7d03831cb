package convo

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 5, "hello"},
		{"hello", 10, "hello"},
		{"hello world", 5, "hello…"},
		{"华为Mate60", 4, "华…"}, // 华 is 3 bytes: the cut steps back to 为's start
		{"华为Mate60", 6, "华为…"},
		{"华为", 2, "…"},
		{"abc", 0, "…"},
		{"abc", -1, "…"},
	} {
		if got := Clip(tc.s, tc.n); got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func FuzzClip(f *testing.F) {
	f.Add("华为Mate60 Pro 的价格", 7)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= 64
		got := Clip(s, n)
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Clip(%q, %d) = %q cuts inside a character", s, n, got)
		}
		body := strings.TrimSuffix(got, "…")
		if got != s && (len(body) > max(n, 0) || !strings.HasPrefix(s, body)) {
			t.Fatalf("Clip(%q, %d) = %q: not a prefix of at most n bytes", s, n, got)
		}
	})
}
