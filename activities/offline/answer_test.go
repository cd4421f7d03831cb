package offline

import (
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/internal/proptest/talk"
	"github.com/ctxflow/ctxflow/lexical"
)

var kb = []Document{
	{ID: "phones/mate60", Text: "华为Mate60搭载麒麟9000s芯片，配备12GB内存。华为Mate60售价5999元起。它支持卫星通话。"},
	{ID: "phones/iphone15", Text: "iPhone 15 的价格是5999元。"},
	{ID: "phones/pixel8", Text: "The Pixel 8 costs $699. It has a Tensor G3 chip and 8 GB of RAM. Google released it in October 2023."},
	{ID: "food/cambridge", Text: "The Golden Wok is a Chinese restaurant in the north part of town. Its phone number is 01223 350688."},
}

func TestAnswer(t *testing.T) {
	tests := []struct {
		name     string
		question string
		docs     []Document
		kind     AnswerKind
		sources  []string
		contains []string
		lacks    []string
	}{
		{"zh extractive", "华为Mate60多少钱", kb, AnswerExtractive, []string{"phones/mate60"},
			[]string{lexical.LabelZH, "华为Mate60售价5999元起。 [phones/mate60]"}, []string{"iPhone"}},
		{"en extractive", "How much is the Pixel 8?", kb, AnswerExtractive, []string{"phones/pixel8"},
			[]string{lexical.LabelEN, "The Pixel 8 costs $699. [phones/pixel8]"}, []string{"Golden Wok"}},
		{"en two sentences", "phone number of the Golden Wok restaurant", kb, AnswerExtractive, []string{"food/cambridge"},
			[]string{"01223 350688", "[food/cambridge]"}, nil},
		{"not found", "What is the weather in Paris?", kb, AnswerNotFound, nil,
			[]string{lexical.LabelEN, "nothing on “What is the weather in Paris”"}, nil},
		{"zh not found", "北京今天天气怎么样", kb, AnswerNotFound, nil,
			[]string{lexical.LabelZH, "知识库中没有关于「北京今天天气怎么样」的内容"}, nil},
		{"no knowledge base", "How much is the Pixel 8?", nil, AnswerNoKnowledge, nil,
			[]string{lexical.LabelEN, "“How much is the Pixel 8”"}, nil},
		{"greeting", "Hello!", kb, AnswerGreeting, nil, []string{lexical.LabelEN, "Hello"}, nil},
		{"zh greeting", "你好", nil, AnswerGreeting, nil, []string{lexical.LabelZH, "你好"}, nil},
		{"thanks", "Thank you so much!", kb, AnswerGreeting, nil, []string{"You're welcome"}, nil},
		{"zh goodbye", "好的，再见", kb, AnswerGreeting, nil, []string{"再见"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Answer(tc.question, tc.docs)
			if got.Kind != tc.kind {
				t.Errorf("Kind = %s, want %s\n%s", got.Kind, tc.kind, got.Text)
			}
			if !slices.Equal(got.Sources, tc.sources) {
				t.Errorf("Sources = %q, want %q", got.Sources, tc.sources)
			}
			for _, want := range tc.contains {
				if !strings.Contains(got.Text, want) {
					t.Errorf("answer lacks %q:\n%s", want, got.Text)
				}
			}
			for _, bad := range tc.lacks {
				if strings.Contains(got.Text, bad) {
					t.Errorf("answer has %q:\n%s", bad, got.Text)
				}
			}
		})
	}
}

// pages are Markdown pages with sections, as ingested documents are.
var pages = []Document{
	{ID: "mate60.md#0", Text: "# 华为Mate60\n\n华为Mate60是华为于2023年8月发布的旗舰手机，搭载麒麟9000s芯片。\n\n## 价格\n\n" +
		"12GB+256GB版本售价5999元。\n\n## 电池与续航\n\n电池容量为4750毫安时，支持66W有线快充。\n\n## 屏幕\n\n采用6.69英寸OLED曲面屏，支持120Hz刷新率。"},
	{ID: "mate70.md#0", Text: "# 华为Mate70\n\n华为Mate70是Mate60的下一代，于2024年11月发布。\n\n## 电池与续航\n\n电池容量为5300毫安时，支持66W有线快充。"},
	{ID: "pixel.md#0", Text: "# Pixel 8\n\nThe Pixel 8 is a phone made by Google.\n\n## Battery\n\n- It has a 4575 mAh battery.\n- It charges at 27 W.\n\n" +
		"## Pricing\n\nIt sells for $699 in the US."},
	{ID: "headings.md#0", Text: "# 华为Mate60\n\n## 屏幕\n\n## 价格\n"},
}

func TestAnswerQuotesTheAspect(t *testing.T) {
	tests := []struct {
		name     string
		question string
		docs     []Document
		kind     AnswerKind
		sources  []string
		contains []string
		lacks    []string
	}{
		{"zh aspect under its section heading", "华为Mate60的续航怎么样？", pages[:2], AnswerExtractive, []string{"mate60.md#0"},
			[]string{"电池与续航：电池容量为4750毫安时", "[mate60.md#0]"}, []string{"## ", "5300"}},
		{"zh value kind answers an aspect named by the heading", "华为Mate60的价格是多少？", pages[:2], AnswerExtractive, []string{"mate60.md#0"},
			[]string{"价格：12GB+256GB版本售价5999元。"}, []string{"## ", "续航"}},
		{"zh screen", "华为Mate60的屏幕多大？", pages, AnswerExtractive, []string{"mate60.md#0"},
			[]string{"屏幕：采用6.69英寸"}, []string{"## "}},
		{"zh aspect absent: honest", "华为Mate60支持防水吗？", pages[:2], AnswerNotFound, nil,
			[]string{"知识库中没有关于「华为Mate60支持防水吗」的内容"}, []string{"支持66W"}},
		{"zh aspect present in another document", "华为Mate60支持防水吗？",
			append([]Document{{ID: "pro.md#0", Text: "# 华为Mate60 Pro\n\n华为Mate60 Pro的防水等级为IP68。"}}, pages[:2]...),
			AnswerExtractive, []string{"pro.md#0"}, []string{"IP68"}, []string{"支持66W"}},
		{"zh introduction from the page about the entity", "介绍下华为Mate60", pages[:2], AnswerExtractive, []string{"mate60.md#0"},
			[]string{"华为Mate60是华为于2023年8月发布的旗舰手机", "价格：", "电池与续航："}, []string{"Mate70", "# "}},
		{"zh comparison quotes each side", "华为Mate60和华为Mate70哪个电池更大？", pages[:2], AnswerExtractive, []string{"mate60.md#0", "mate70.md#0"},
			[]string{"华为Mate60 / 电池与续航：电池容量为4750毫安时", "华为Mate70 / 电池与续航：电池容量为5300毫安时"}, nil},
		{"zh comparison with a side missing", "华为Mate60和华为Mate70哪个屏幕更大？", pages[:2], AnswerExtractive, []string{"mate60.md#0"},
			[]string{"6.69英寸", "知识库中没有关于「华为Mate70」的这方面内容"}, nil},
		{"headings alone answer nothing", "华为Mate60的屏幕多大？", pages[3:], AnswerNotFound, nil,
			[]string{"知识库中没有关于「华为Mate60的屏幕多大」的内容"}, []string{"## "}},
		{"en aspect from a list under its heading", "How big is the Pixel 8 battery?", pages, AnswerExtractive, []string{"pixel.md#0"},
			[]string{"- It has a 4575 mAh battery. [pixel.md#0]", "Battery: It charges at 27 W."}, []string{"$699", "- - "}},
		{"en price without the word", "How much is the Pixel 8?", pages, AnswerExtractive, []string{"pixel.md#0"},
			[]string{"Pricing: It sells for $699 in the US."}, []string{"mAh"}},
		{"en aspect absent: honest", "Does the Pixel 8 support wireless charging?", pages, AnswerNotFound, nil,
			[]string{"The knowledge base has nothing on “Does the Pixel 8 support wireless charging”"}, []string{"27 W"}},
		{"en introduction", "Tell me about the Pixel 8", pages, AnswerExtractive, []string{"pixel.md#0"},
			[]string{"The Pixel 8 is a phone made by Google."}, []string{"华为"}},
		{"a page that never names the question's product does not answer", "华为Mate60的续航怎么样？",
			[]Document{{ID: "mate70.md#0", Text: "# 华为Mate70\n\n## 电池与续航\n\n电池容量为5300毫安时。"}}, AnswerNotFound, nil,
			[]string{"知识库中没有"}, []string{"5300"}},
		{"one that names it in passing gives way to the page about it", "华为Mate60的续航怎么样？", []Document{pages[1], pages[0]}, AnswerExtractive,
			[]string{"mate60.md#0"}, []string{"4750"}, []string{"5300"}},
		{"a plain title line is a title and a section, not a sentence", "华为Mate60多少钱？",
			[]Document{{ID: "mate60-price", Text: "华为Mate60 / 价格\n华为Mate60的12GB+256GB版本售价5999元。"}}, AnswerExtractive, []string{"mate60-price"},
			[]string{"- 价格：华为Mate60的12GB+256GB版本售价5999元。 [mate60-price]"}, []string{"- 华为Mate60 / 价格 ["}},
		{"a sentence sharing only a common word gives way", "华为手表充一次电能用多久？", []Document{
			{ID: "watch", Text: "华为WATCH GT 4智能手表可以监测心率，典型场景下续航约14天。"},
			{ID: "mate70", Text: "华为Mate70配备5300毫安时电池，支持66W有线快充。"},
		}, AnswerExtractive, []string{"watch"}, []string{"续航约14天"}, []string{"5300"}},
		{"an aspect worded otherwise is passed over", "哪款手机自带手写笔？",
			[]Document{{ID: "s24", Text: "三星Galaxy S24 Ultra机身内置S Pen手写笔。"}}, AnswerExtractive, []string{"s24"}, []string{"S Pen手写笔"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Answer(tc.question, tc.docs)
			if got.Kind != tc.kind {
				t.Errorf("Kind = %s, want %s\n%s", got.Kind, tc.kind, got.Text)
			}
			if !slices.Equal(got.Sources, tc.sources) {
				t.Errorf("Sources = %q, want %q\n%s", got.Sources, tc.sources, got.Text)
			}
			for _, want := range tc.contains {
				if !strings.Contains(got.Text, want) {
					t.Errorf("answer lacks %q:\n%s", want, got.Text)
				}
			}
			for _, bad := range tc.lacks {
				if strings.Contains(got.Text, bad) {
					t.Errorf("answer has %q:\n%s", bad, got.Text)
				}
			}
		})
	}
}

// TestAnswerNeverABareHeading: whatever the question, no quoted line is a
// heading or ends with one.
func TestAnswerNeverABareHeading(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := rapid.SampledFrom([]string{"华为Mate60的续航怎么样？", "它的屏幕多大？", "价格", "介绍下华为Mate60", "How much is the Pixel 8?", "Battery", "Pricing?"}).Draw(t, "question")
		docs := rapid.SliceOfN(rapid.SampledFrom(pages), 1, 4).Draw(t, "docs")
		got := Answer(q, docs)
		for _, line := range strings.Split(got.Text, "\n")[1:] {
			body := strings.TrimSpace(lexical.StripCitations(strings.TrimPrefix(line, "- ")))
			if strings.HasPrefix(body, "#") || strings.HasSuffix(body, "：") || strings.HasSuffix(body, ":") {
				t.Fatalf("quoted a heading %q:\n%s", line, got.Text)
			}
		}
	})
}

func TestAnswerInLanguage(t *testing.T) {
	zh := AnswerIn("iPhone 15 price?", []Document{{ID: "p", Text: "# iPhone 15\n\n## 价格\n\niPhone 15售价5999元。"}}, true)
	if !strings.HasPrefix(zh.Text, lexical.LabelZH+"知识库摘录：") || !strings.Contains(zh.Text, "5999元") {
		t.Errorf("in Chinese:\n%s", zh.Text)
	}
	en := AnswerIn("华为Mate60防水吗", pages[:1], false)
	if en.Kind != AnswerNotFound || !strings.HasPrefix(en.Text, lexical.LabelEN+" The knowledge base has nothing on") {
		t.Errorf("in English:\n%s", en.Text)
	}
}

func TestAnswerProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := talk.Text(6).Draw(t, "question")
		docs := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Document {
			return Document{ID: rapid.StringMatching(`[a-z0-9/]{1,8}`).Draw(t, "id"), Text: talk.Text(12).Draw(t, "text")}
		}), 0, 4).Draw(t, "docs")
		got := Answer(q, docs)
		if !strings.HasPrefix(got.Text, lexical.LabelEN) && !strings.HasPrefix(got.Text, lexical.LabelZH) {
			t.Fatalf("answer not labelled: %q", got.Text)
		}
		again := Answer(q, docs)
		if got.Text != again.Text || !slices.Equal(got.Sources, again.Sources) {
			t.Fatal("not deterministic")
		}
		if (got.Kind == AnswerExtractive) != (len(got.Sources) > 0) {
			t.Fatalf("kind %s with sources %q", got.Kind, got.Sources)
		}
		for _, id := range got.Sources {
			if !strings.Contains(got.Text, "["+id+"]") {
				t.Fatalf("source %q not cited in %q", id, got.Text)
			}
		}
	})
}
