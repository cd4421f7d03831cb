package lexical

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/ctxflow/ctxflow/internal/eval/evaldata"
)

// The rewrite tests read small samples in testdata/eval (see its
// SOURCE.md); with CTXFLOW_EVALDATA set (e.g. to ../shared/evaldata) they
// read the whole dev sets there instead, <set>/cases.jsonl.
func casesPath(set string) string {
	if d := os.Getenv("CTXFLOW_EVALDATA"); d != "" {
		if set == "zh" {
			set = "rewrite-zh"
		}
		return filepath.Join(d, set, "cases.jsonl")
	}
	return filepath.Join("testdata", "eval", set+".jsonl")
}

// loadCases reads a data set's cases.jsonl; a missing set fails the test.
func loadCases(t testing.TB, set string) []evaldata.Case {
	t.Helper()
	cases, err := evaldata.ReadCases(casesPath(set))
	if os.IsNotExist(err) {
		t.Fatalf("evaluation set %s not found: %v", set, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

func same(a, b string) bool { return strings.TrimSpace(a) == strings.TrimSpace(b) }

// units splits text for diffing: runes for Chinese, words for English.
func units(s string, zh bool) []string {
	var out []string
	if zh {
		for _, r := range s {
			if !unicode.IsSpace(r) && !unicode.IsPunct(r) {
				out = append(out, string(r))
			}
		}
		return out
	}
	for _, w := range strings.Fields(s) {
		if w = strings.ToLower(strings.TrimFunc(w, unicode.IsPunct)); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// goldSpan is the longest run of the gold rewrite that the question lacks
// (by a longest common subsequence of units): the entity the rewrite adds.
func goldSpan(question, gold string, zh bool) []string {
	a, b := units(question, zh), units(gold, zh)
	l := make([][]int, len(a)+1)
	for i := range l {
		l[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				l[i][j] = l[i+1][j+1] + 1
			} else {
				l[i][j] = max(l[i+1][j], l[i][j+1])
			}
		}
	}
	var best, cur []string
	for i, j := 0, 0; j < len(b); {
		if i < len(a) && a[i] == b[j] {
			i, j, cur = i+1, j+1, nil
			continue
		}
		if i < len(a) && l[i+1][j] >= l[i][j+1] {
			i++
			continue
		}
		cur = append(cur, b[j])
		if len(cur) > len(best) {
			best = append([]string(nil), cur...)
		}
		j++
	}
	return best
}

func join(u []string, zh bool) string {
	if zh {
		return strings.Join(u, "")
	}
	return strings.Join(u, " ")
}

// containsSpan reports whether the rewrite holds the whole gold span.
func containsSpan(rewrite string, span []string, zh bool) bool {
	return strings.Contains(join(units(rewrite, zh), zh), join(span, zh))
}

// touchesSpan reports whether the rewrite adds part of the gold span that
// the question lacks: a content word (English) or two runes (Chinese).
func touchesSpan(question, rewrite string, span []string, zh bool) bool {
	q, r := join(units(question, zh), zh), join(units(rewrite, zh), zh)
	if zh {
		for i := 0; i+1 < len(span); i++ {
			bi := span[i] + span[i+1]
			if strings.Contains(r, bi) && !strings.Contains(q, bi) {
				return true
			}
		}
		return false
	}
	qw := setOf(q)
	for _, w := range span {
		if !stopwords[w] && len(w) > 2 && !qw[w] && setOf(r)[w] {
			return true
		}
	}
	return false
}

// hasPronoun is the evaluation's own, fixed test for a referring pronoun
// (independent of the rewriter's rules).
func hasPronoun(q string, zh bool) bool {
	if zh {
		for _, p := range []string{"它", "他", "她", "这个", "那个", "这些", "那些"} {
			if strings.Contains(q, p) {
				return true
			}
		}
		return false
	}
	for _, w := range units(q, false) {
		switch w {
		case "it", "its", "they", "them", "their", "he", "him", "his", "she", "her", "this", "that", "these", "those":
			return true
		}
	}
	return false
}

type rate struct{ hit, n int }

func (r *rate) add(ok bool) {
	r.n++
	if ok {
		r.hit++
	}
}

func (r rate) value() float64 {
	if r.n == 0 {
		return 0
	}
	return float64(r.hit) / float64(r.n)
}

// TestEvalRewrite measures the rewriter on the evaluation samples and
// holds it to the rates it reaches there: a regression test. The rules were
// written while looking at the whole sets (there is no held-out split), so
// the rates are optimistic for other conversations; the Chinese sample was
// written after the rules.
func TestEvalRewrite(t *testing.T) {
	zhCases := loadCases(t, "zh")
	sets := []string{"camrest-gecor", "cqr-kvret"}
	// The rates each measure must keep: on the samples, and on the whole
	// dev sets (with canard) when CTXFLOW_EVALDATA points at them.
	// Issue 23 (item 2) raised the unchanged rates: on the samples 0.92 →
	// 0.96 and 0.955 → 0.964, on the dev sets 0.980 → 0.993 and 0.973 → 0.975.
	mins := []float64{0.95, 0.95, 0.95, 0.94, 0.70, 0.70, 0.02, 0.06}
	if os.Getenv("CTXFLOW_EVALDATA") != "" {
		sets = append(sets, "canard")
		mins = []float64{0.98, 0.97, 0.97, 0.94, 0.62, 0.70, 0.18, 0.38}
	}
	en := map[string][]evaldata.Case{}
	for _, s := range sets {
		en[s] = loadCases(t, s)
	}

	// Precision: questions that need no rewrite must come back unchanged.
	var enNatural, enGold, zhGold, zhForeign rate
	for _, s := range sets {
		for _, c := range en[s] {
			if len(c.History) == 0 {
				continue
			}
			if same(c.Question, c.GoldRewrite) {
				enNatural.add(!Rewrite(c.Question, c.Messages()).Changed)
			} else {
				enGold.add(!Rewrite(c.GoldRewrite, c.Messages()).Changed)
			}
		}
	}
	for i, c := range zhCases {
		zhGold.add(!Rewrite(c.GoldRewrite, c.Messages()).Changed)
		// A dialogue's opening line asked after another dialogue: a topic
		// switch, which needs no rewrite either.
		next := zhCases[(i+1)%len(zhCases)]
		zhForeign.add(!Rewrite(next.History[0].Content, c.Messages()).Changed)
	}
	t.Logf("unchanged: en questions that need no rewrite (question == gold, with history): %.3f of %d", enNatural.value(), enNatural.n)
	t.Logf("unchanged: en gold rewrites asked as questions: %.3f of %d", enGold.value(), enGold.n)
	t.Logf("unchanged: zh gold rewrites asked as questions: %.3f of %d", zhGold.value(), zhGold.n)
	t.Logf("unchanged: zh opening lines asked after another dialogue: %.3f of %d", zhForeign.value(), zhForeign.n)

	// Recall: cases that need a rewrite, with (pronoun) or without
	// (ellipsis) a pronoun, whose rewrite contains the gold entity: the
	// longest span the gold rewrite adds to the question, whole (strict) or
	// in part (a content word, or two Chinese characters).
	recall := func(name string, cases []evaldata.Case, zh, pronoun bool) (strict, loose rate) {
		for _, c := range cases {
			if len(c.History) == 0 || same(c.Question, c.GoldRewrite) || pronoun != hasPronoun(c.Question, zh) {
				continue
			}
			span := goldSpan(c.Question, c.GoldRewrite, zh)
			if len(span) == 0 {
				continue
			}
			r := Rewrite(c.Question, c.Messages())
			strict.add(containsSpan(r.Query, span, zh))
			loose.add(touchesSpan(c.Question, r.Query, span, zh))
		}
		kind := "pronoun"
		if !pronoun {
			kind = "ellipsis"
		}
		t.Logf("%s %s cases: gold entity in the rewrite %.3f, part of it %.3f, of %d", name, kind, strict.value(), loose.value(), strict.n)
		return strict, loose
	}
	zhStrict, zhLoose := recall("zh", zhCases, true, true)
	recall("zh", zhCases, true, false)
	var enStrict, enLoose rate
	for _, s := range sets {
		st, lo := recall(s, en[s], false, true)
		enStrict.hit, enStrict.n = enStrict.hit+st.hit, enStrict.n+st.n
		enLoose.hit, enLoose.n = enLoose.hit+lo.hit, enLoose.n+lo.n
		recall(s, en[s], false, false)
	}
	t.Logf("en pronoun cases, all sets: gold entity in the rewrite %.3f, part of it %.3f, of %d", enStrict.value(), enLoose.value(), enStrict.n)

	for i, c := range []struct {
		name string
		got  float64
	}{
		{"en unchanged when no rewrite is needed", enNatural.value()},
		{"en gold rewrites unchanged", enGold.value()},
		{"zh gold rewrites unchanged", zhGold.value()},
		{"zh topic switches unchanged", zhForeign.value()},
		{"zh pronoun cases with the gold entity", zhStrict.value()},
		{"zh pronoun cases with part of it", zhLoose.value()},
		{"en pronoun cases with the gold entity", enStrict.value()},
		{"en pronoun cases with part of it", enLoose.value()},
	} {
		if c.got < mins[i] {
			t.Errorf("%s: %.3f, below %.2f", c.name, c.got, mins[i])
		}
	}
}
