package offline

import (
	"context"
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/lexical"
)

func TestReformulateTriesEachFormOnce(t *testing.T) {
	e := &Engine{}
	ctx := context.Background()
	tests := []struct {
		name, question string
		want           []string // successive rewrites; the last is "no other formulation"
	}{
		{"english", "How much does the Pixel 8 cost in Germany?", []string{"pixel 8 germany cost", "pixel 8 germany", "pixel 8"}},
		{"chinese", "华为Mate60的价格是多少？", []string{"华为mate60 价格", "华为mate60"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := activities.ReformulateRequest{Original: tc.question, Current: tc.question}
			var got []string
			for range 6 {
				r, err := e.Reformulate(ctx, "offline", req)
				if err != nil {
					t.Fatal(err)
				}
				if r.RewrittenQuery == req.Current {
					if !strings.Contains(r.RewriteReason, "no other formulation") {
						t.Errorf("unchanged query with reason %q", r.RewriteReason)
					}
					break
				}
				if r.RewriteReason == "" || len(r.Keywords) == 0 {
					t.Errorf("rewrite %+v lacks a reason or keywords", r)
				}
				got = append(got, r.RewrittenQuery)
				req.History = append(req.History, r)
				req.Current = r.RewrittenQuery
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("rewrites = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEngineGradeConfidence(t *testing.T) {
	e := &Engine{}
	yes, err := e.Grade(context.Background(), "", "How much is the Pixel 8?", "The Pixel 8 costs 699 dollars.")
	if err != nil || !yes.IsRelevant || yes.Confidence <= 0.3 || yes.Reasoning == "" {
		t.Errorf("relevant grade = %+v, %v", yes, err)
	}
	no, _ := e.Grade(context.Background(), "", "How much is the Pixel 8?", "Lisbon is mild in winter.")
	if no.IsRelevant || no.Confidence < 0.5 {
		t.Errorf("irrelevant grade = %+v", no)
	}
	if !lexical.IsSmallTalk("thanks, bye!") || lexical.IsSmallTalk("thanks, what is the Pixel 8 price?") {
		t.Error("IsSmallTalk")
	}
}
