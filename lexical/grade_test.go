package lexical

import (
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/internal/proptest/talk"
)

func TestGradeOrdering(t *testing.T) {
	tests := []struct {
		query string
		// docs from most to least relevant; the first is relevant, the
		// last is not.
		docs []string
	}{
		{"华为Mate60的价格是多少", []string{
			"华为Mate60的价格是5999元起，12GB+256GB版本售价6999元。",
			"华为Mate60搭载麒麟9000s芯片，支持卫星通话。",
			"iPhone 15 的价格是5999元。",
			"今天北京天气晴朗，适合出游。",
		}},
		{"How much does the Pixel 8 cost?", []string{
			"The Pixel 8 costs $699 in the United States.",
			"The Pixel 8 has a Tensor G3 chip.",
			"The iPhone 15 costs $799.",
			"Cambridge has many restaurants in the north part of town.",
		}},
		{"restaurants in the north part of town", []string{
			"The Golden Wok is a restaurant in the north part of town.",
			"There are several restaurants in the west part of town.",
			"The Pixel 8 costs $699.",
		}},
	}
	for _, tc := range tests {
		var prev GradeResult
		for i, d := range tc.docs {
			g := Grade(tc.query, d)
			t.Logf("%q / %q: %+v", tc.query, d, g)
			if i == 0 && !g.Relevant {
				t.Errorf("%q: best document not relevant: %s", tc.query, g.Reason)
			}
			if i == len(tc.docs)-1 && g.Relevant {
				t.Errorf("%q: unrelated document %q relevant: %s", tc.query, d, g.Reason)
			}
			if i > 0 && g.Score >= prev.Score {
				t.Errorf("%q: document %d scores %.3f, not below document %d (%.3f)", tc.query, i, g.Score, i-1, prev.Score)
			}
			prev = g
		}
	}
}

func TestGradeReason(t *testing.T) {
	g := Grade("华为Mate60的价格", "iPhone 15 的价格是5999元。")
	if g.Relevant || g.Reason == "" {
		t.Errorf("got %+v, want not relevant with a reason", g)
	}
	if g := Grade("的吗？", "anything"); g.Relevant || g.Score != 0 {
		t.Errorf("query without keywords: %+v", g)
	}
}

func TestGradeProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := talk.Text(6).Draw(t, "query")
		d := talk.Text(12).Draw(t, "doc")
		g := Grade(q, d)
		if g.Score < 0 || g.Score > 1 {
			t.Fatalf("score %v out of [0, 1]", g.Score)
		}
		if g != Grade(q, d) {
			t.Fatal("not deterministic")
		}
		if g.Relevant && g.Score < RelevanceThreshold {
			t.Fatalf("relevant under the threshold: %+v", g)
		}
		if Grade(q, "").Relevant {
			t.Fatal("empty document relevant")
		}
		if len(keywords(q)) > 0 && !Grade(q, q).Relevant {
			t.Fatalf("%q not relevant to itself: %+v", q, Grade(q, q))
		}
	})
}

// TestGradeFindsAnEntityTheStemmerCuts: a document's words are stemmed, so
// a query entity that ends like a plural ("…ds") is found by its stem too.
func TestGradeFindsAnEntityTheStemmerCuts(t *testing.T) {
	for _, marker := range []string{"keeptenantdn6udx8nt4ds", "widgets", "notes"} {
		g := Grade("What colour is the "+marker+" widget?", "The "+marker+" widget is teal.")
		if !g.Relevant || strings.Contains(g.Reason, "lacks") {
			t.Errorf("%s: %+v", marker, g)
		}
	}
}
