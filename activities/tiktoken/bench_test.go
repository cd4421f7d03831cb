package tiktoken

import (
	"strings"
	"testing"
)

// Sample texts of about 1 KB each: prose as it appears in chat history.
var (
	englishText = strings.Repeat("The session workflow keeps the conversation tree, trims it to the model's budget, and folds older turns into a running summary. ", 8)
	chineseText = strings.Repeat("上下文管理把对话历史裁剪到模型的预算之内，并把较早的轮次压缩成摘要，同时保留用户的意图和偏好。", 8)
)

// BenchmarkCount reports tokenizer throughput in MB/s for English and Chinese
// text with both encodings (without the memo of recent texts).
func BenchmarkCount(b *testing.B) {
	for _, enc := range []string{CL100kBase, O200kBase} {
		tok := mustNew(b, enc)
		for _, tc := range []struct{ name, text string }{{"english", englishText}, {"chinese", chineseText}} {
			b.Run(enc+"/"+tc.name, func(b *testing.B) {
				b.SetBytes(int64(len(tc.text)))
				b.ReportAllocs()
				for b.Loop() {
					tok.count(tc.text)
				}
			})
		}
	}
}

// BenchmarkCountReference is tiktoken-go's own encoder on the same texts,
// for comparison.
func BenchmarkCountReference(b *testing.B) {
	for _, enc := range []string{CL100kBase, O200kBase} {
		ref := reference(b, enc)
		for _, tc := range []struct{ name, text string }{{"english", englishText}, {"chinese", chineseText}} {
			b.Run(enc+"/"+tc.name, func(b *testing.B) {
				b.SetBytes(int64(len(tc.text)))
				for b.Loop() {
					_ = len(ref.EncodeOrdinary(tc.text))
				}
			})
		}
	}
}

// BenchmarkNew measures the cost of New after the first load (shared ranks).
func BenchmarkNew(b *testing.B) {
	mustNew(b, CL100kBase)
	for b.Loop() {
		mustNew(b, CL100kBase)
	}
}
