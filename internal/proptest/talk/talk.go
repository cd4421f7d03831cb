// Package talk generates bilingual conversations for property tests (its
// own package: convo's tests use proptest, which must not import convo).
package talk

import (
	"slices"
	"strings"

	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/convo"
)

// Turns builds a history from alternating user and assistant texts.
func Turns(texts ...string) []convo.Message {
	out := make([]convo.Message, len(texts))
	for i, s := range texts {
		role := convo.RoleUser
		if i%2 == 1 {
			role = convo.RoleAssistant
		}
		out[i] = convo.Message{Role: role, Content: s}
	}
	return out
}

// fragments are pieces of questions and answers in both languages, with
// entities, pronouns, particles, numbers and punctuation.
var fragments = []string{
	"华为Mate60", "它", "的配置", "多少钱", "呢", "？", "。", "这个", "那个", "他们", "刚才", "价格", "版本", "你好", "谢谢",
	"我想买", "小米14", "介绍下", "琅琊榜", "好看吗", "我", "吃", "海底捞", "售价5999元", "，",
	"Tell me about", "the Pixel 8", "how much is", "it", "?", ".", "they", "Frank Zappa", "that", "this year", "price",
	"Thank you", "goodbye", "Golden Wok", "is in the", "north part of town", "$699", "order #4521", "I prefer", "black",
	" ", "\n", "!", "iPhone 15 Pro", "of", "and", "the", "[user]", "[x] ", "😀", "e.g.", "3.5",
}

// Text draws a text of 0 to n fragments of bilingual questions and
// answers, and of extra ones.
func Text(n int, extra ...string) *rapid.Generator[string] {
	pool := append(slices.Clip(extra), fragments...)
	return rapid.Custom(func(t *rapid.T) string {
		parts := rapid.SliceOfN(rapid.SampledFrom(pool), 0, n).Draw(t, "parts")
		return strings.Join(parts, "")
	})
}

// History draws a short conversation of such texts.
func History() *rapid.Generator[[]convo.Message] {
	return rapid.Custom(func(t *rapid.T) []convo.Message {
		return Turns(rapid.SliceOfN(Text(8), 0, 6).Draw(t, "history")...)
	})
}
