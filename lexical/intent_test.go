package lexical

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestIntentsOnHeldOutUtterances measures the offline classifier on fifty
// labelled utterances that are not its examples (testdata/intents.jsonl):
// its accuracy, and how the confident ones (≥ threshold) fare, the
// figures behind the session's fallback and routing thresholds.
func TestIntentsOnHeldOutUtterances(t *testing.T) {
	f, err := os.Open("testdata/intents.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := NewIntents(nil)
	var n, right int
	type bucket struct{ n, right int }
	confident := map[float64]*bucket{0.6: {}, 0.7: {}, 0.8: {}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var row struct{ Text, Intent string }
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		got, p := c.Guess(row.Text, nil)
		n++
		if got == row.Intent {
			right++
		} else {
			t.Logf("%q: %s (%.2f), want %s", row.Text, got, p, row.Intent)
		}
		for th, b := range confident {
			if p >= th {
				b.n++
				if got == row.Intent {
					b.right++
				}
			}
		}
	}
	acc := float64(right) / float64(n)
	t.Logf("accuracy %.2f (%d of %d)", acc, right, n)
	for _, th := range []float64{0.6, 0.7, 0.8} {
		b := confident[th]
		t.Logf("confidence ≥ %.1f: %d of %d, accuracy %.2f", th, b.n, n, float64(b.right)/float64(max(b.n, 1)))
	}
	if acc < 0.85 {
		t.Errorf("accuracy %.2f, want at least 0.85", acc)
	}
	if b := confident[0.6]; float64(b.right)/float64(max(b.n, 1)) < 0.9 {
		t.Errorf("confident (≥ 0.6) accuracy %d of %d, want at least 0.9", b.right, b.n)
	}
}

// The classifier's answer is always one of its labels, with a
// probability in (0, 1]; each label's own examples are classified as it.
func TestIntentsProperties(t *testing.T) {
	c := NewIntents(nil)
	for _, l := range c.Labels {
		for _, e := range l.Examples {
			if got, _ := c.Guess(e, nil); got != l.Label {
				t.Errorf("example %q of %s: %s", e, l.Label, got)
			}
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		q := rapid.String().Draw(t, "question")
		recent := rapid.SliceOfN(rapid.SampledFrom(c.Names()), 0, 5).Draw(t, "recent")
		got, p := c.Guess(q, recent)
		if !slices.Contains(c.Names(), got) || p <= 0 || p > 1 {
			t.Fatalf("Classify(%q) = %q, %v", q, got, p)
		}
	})
}
