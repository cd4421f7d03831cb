package offline

import (
	"fmt"
	"os"
	"testing"

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/internal/proptest/talk"
)

func BenchmarkSummarize(b *testing.B) {
	msgs := append(append([]convo.Message{}, talk.Turns(
		"介绍下华为Mate60", "华为Mate60是一款旗舰手机，搭载麒麟9000s芯片，支持卫星通话。",
		"价格大概多少", "华为Mate60售价5999元起，12GB+256GB版本售价6999元。", "那我想买白色的", "好的，白沙银款有货。")...), talk.Turns(
		"Tell me about the Pixel 8", "The Pixel 8 is Google's 2023 phone with a Tensor G3 chip.",
		"Which one is cheaper?", "The Pixel 8 costs $699 and the Pixel 8 Pro $999.")...)
	for b.Loop() {
		Summarize("User: lives in Berlin.", msgs, 200, nil)
	}
}

// BenchmarkAnswerIn answers BenchmarkQATurn's question from five chunks of
// the project's README, as the qa turn's generate step does.
func BenchmarkAnswerIn(b *testing.B) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		b.Fatal(err)
	}
	var docs []Document
	for text := string(readme); len(docs) < 5 && text != ""; {
		n := min(len(text), 1200)
		for n < len(text) && text[n] != '\n' {
			n++
		}
		docs = append(docs, Document{ID: fmt.Sprintf("readme-%d", len(docs)), Text: text[:n]})
		text = text[n:]
	}
	for b.Loop() {
		AnswerIn("Which vector stores can hold the knowledge base?", docs, false)
	}
}
