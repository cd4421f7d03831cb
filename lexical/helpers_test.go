package lexical

import (
	"strings"

	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/convo"
)

// turns builds a history from alternating user and assistant texts.
func turns(texts ...string) []convo.Message {
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

// genText draws a text of 0 to n fragments.
func genText(n int) *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		parts := rapid.SliceOfN(rapid.SampledFrom(fragments), 0, n).Draw(t, "parts")
		return strings.Join(parts, "")
	})
}

// genHistory draws a short conversation.
func genHistory() *rapid.Generator[[]convo.Message] {
	return rapid.Custom(func(t *rapid.T) []convo.Message {
		texts := rapid.SliceOfN(genText(8), 0, 6).Draw(t, "history")
		return turns(texts...)
	})
}
