package lexical

import (
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/internal/proptest/talk"
)

// Ten-message conversations in each language (the offline engine's
// benchmarks use them too).
var (
	history10ZH = talk.Turns("介绍下华为Mate60", "华为Mate60是一款旗舰手机，搭载麒麟9000s芯片，支持卫星通话。",
		"它的下一代是什么？", "华为Mate60的下一代可能是Mate70系列，预计明年发布。", "价格大概多少",
		"华为Mate60售价5999元起，12GB+256GB版本售价6999元。", "有白色的吗", "有雅川青、白沙银、南糯紫和雅丹黑四种颜色。",
		"那我想买白色的", "好的，白沙银款有货。")
	history10EN = talk.Turns("Tell me about the Pixel 8", "The Pixel 8 is Google's 2023 phone with a Tensor G3 chip.",
		"Who makes it?", "Google designs it; Foxconn assembles it.", "When was it released?", "It was released in October 2023.",
		"What about the Pixel 8 Pro?", "The Pixel 8 Pro has a bigger screen and a telephoto camera.", "Which one is cheaper?",
		"The Pixel 8 costs $699 and the Pixel 8 Pro $999.")
)

func BenchmarkRewrite(b *testing.B) {
	for _, bc := range []struct {
		name    string
		q       string
		history []convo.Message
	}{
		{"zh/pronoun", "它的配置呢？", history10ZH},
		{"zh/no-trigger", "北京今天的天气怎么样，会下雨吗？", history10ZH},
		{"en/pronoun", "how much is it?", history10EN},
		{"en/no-trigger", "What is the capital of France and how many people live there?", history10EN},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				Rewrite(bc.q, bc.history)
			}
		})
	}
}

func BenchmarkEmbed(b *testing.B) {
	var texts []string
	for _, m := range append(history10ZH, history10EN...) {
		texts = append(texts, strings.Repeat(m.Content, 3))
	}
	for _, dim := range []int{DefaultDim, 1024} {
		e := Embedder{Dim: dim}
		b.Run(map[int]string{DefaultDim: "dim384", 1024: "dim1024"}[dim], func(b *testing.B) {
			var n int64
			for _, t := range texts {
				n += int64(len(t))
			}
			b.SetBytes(n)
			for b.Loop() {
				e.Embed(texts)
			}
		})
	}
}

func BenchmarkGrade(b *testing.B) {
	for b.Loop() {
		for _, d := range []string{"华为Mate60搭载麒麟9000s芯片，配备12GB内存。华为Mate60售价5999元起。它支持卫星通话。",
			"iPhone 15 的价格是5999元。", "The Pixel 8 costs $699. It has a Tensor G3 chip and 8 GB of RAM."} {
			Grade("华为Mate60的价格是多少", d)
		}
	}
}
