package lexical

import (
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/internal/proptest/talk"
)

func TestRewrite(t *testing.T) {
	seed := talk.Turns("介绍下华为Mate60", "华为Mate60是一款旗舰手机，搭载麒麟9000s...",
		"它的下一代是什么？", "华为Mate60的下一代可能是Mate70系列...")
	pixel := talk.Turns("Tell me about the Pixel 8", "The Pixel 8 is Google's 2023 phone with a Tensor G3 chip.")
	tests := []struct {
		name     string
		question string
		history  []convo.Message
		changed  bool
		trigger  string   // prefix of the trigger
		contains []string // in the query
	}{
		{"zh pronoun", "它的配置呢？", talk.Turns("华为Mate60多少钱", "华为Mate60售价5999元起。"), true, "pronoun:它", []string{"华为Mate60的配置呢？"}},
		{"zh pronoun, user turn only", "它的配置呢？", talk.Turns("华为Mate60多少钱"), true, "pronoun:它", []string{"华为Mate60"}},
		{"en pronoun", "how much is it?", pixel, true, "pronoun:it", []string{"how much is Pixel 8?"}},
		{"en possessive", "What is its price?", pixel, true, "pronoun:its", []string{"Pixel 8's price"}},
		{"seed: topic with a relation", "版本是多少呢？", seed, true, "detail:版本", []string{"华为Mate60", "下一代", "版本是多少"}},
		{"zh demonstrative, brand and model number", "那个多少钱", talk.Turns("我想买小米14"), true, "pronoun:那个", []string{"小米14多少钱"}},
		{"zh short question gets its topic", "好看吗", talk.Turns("金瓶梅怎么样", "看过"), true, "short", []string{"金瓶梅好看吗"}},
		{"zh ellipsis marker", "刚才说的价格是多少", talk.Turns("iPhone 15 Pro怎么样", "不错"), true, "ellipsis:刚才", []string{"iPhone 15 Pro"}},
		{"zh plural pronoun", "他们的首都在哪", talk.Turns("法国和德国"), true, "pronoun:他们", []string{"法国和德国的首都"}},
		{"en band name with joiners", "When did they disband?", talk.Turns("Frank Zappa", "What group disbanded?", "Zappa and the Mothers of Invention"), true, "pronoun:they", []string{"Zappa and the Mothers of Invention disband"}},
		{"en detail follow-up", "What's the price?", pixel, true, "detail:price", []string{"price of Pixel 8"}},
		{"en demonstrative with a head noun", "What is the address of that restaurant?", talk.Turns("Golden Wok is in the north part of town."), true, "pronoun:that", []string{"address of Golden Wok?"}},

		{"no trigger", "What is the capital of France?", pixel, false, "", nil},
		{"no history", "how much is it?", nil, false, "pronoun:it", nil},
		{"topic already named", "how much is the Pixel 8?", pixel, false, "detail:how much", nil},
		{"small talk", "Thank you, goodbye.", pixel, false, "", nil},
		{"zh small talk", "好的谢谢", talk.Turns("华为Mate60多少钱"), false, "", nil},
		{"weather it", "Is it raining in Paris?", pixel, false, "", nil},
		{"conjunction that", "Did he say that the phone is good?", pixel, true, "pronoun:he", []string{"Did Pixel 8 say that"}},
		{"antecedent in the question", "Did Frank say he liked it?", pixel, false, "pronoun:he", nil},
		{"self-contained detail question", "苹果手机多少钱", talk.Turns("华为Mate60多少钱"), false, "detail:多少钱", nil},
		{"zh bare topic switch", "重庆", talk.Turns("华为Mate60多少钱"), false, "short", nil},
		{"zh short question with its own subject", "你会做饭吗", talk.Turns("华为Mate60多少钱"), false, "short", nil},
		{"empty", "  ", pixel, false, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Rewrite(tc.question, tc.history)
			if got.Changed != tc.changed {
				t.Errorf("Changed = %v, want %v (%+v)", got.Changed, tc.changed, got)
			}
			if !strings.HasPrefix(got.Trigger, tc.trigger) || (tc.trigger == "") != (got.Trigger == "") {
				t.Errorf("Trigger = %q, want %q", got.Trigger, tc.trigger)
			}
			if !tc.changed && got.Query != tc.question {
				t.Errorf("Query = %q, want the question unchanged", got.Query)
			}
			for _, want := range tc.contains {
				if !strings.Contains(got.Query, want) {
					t.Errorf("Query = %q, want it to contain %q", got.Query, want)
				}
			}
		})
	}
}

func TestRewriteProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := talk.Text(6).Draw(t, "question")
		h := talk.History().Draw(t, "history")
		got := Rewrite(q, h)
		if again := Rewrite(q, h); again != got {
			t.Fatalf("not deterministic: %+v then %+v", got, again)
		}
		if got.Changed != (got.Query != q) {
			t.Fatalf("Changed = %v but Query %q vs question %q", got.Changed, got.Query, q)
		}
		if got.Trigger == "" && got.Changed {
			t.Fatalf("changed without a trigger: %+v", got)
		}
		if got.Changed && (got.Topic == "" || !containsFold(got.Query, got.Topic)) {
			t.Fatalf("changed query %q lacks its topic %q", got.Query, got.Topic)
		}
		if len(h) == 0 && got.Changed {
			t.Fatalf("changed without history: %+v", got)
		}
	})
}

func TestRewriteArbitraryText(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := rapid.String().Draw(t, "question")
		h := talk.Turns(rapid.SliceOfN(rapid.String(), 0, 4).Draw(t, "history")...)
		got := Rewrite(q, h)
		if got.Changed != (got.Query != q) {
			t.Fatalf("Changed = %v but Query %q vs question %q", got.Changed, got.Query, q)
		}
	})
}

func TestEntities(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"介绍下华为Mate60", []string{"华为Mate60"}},
		{"Tell me about the Pixel 8", []string{"Pixel 8"}},
		{"The Golden Wok is in the north part of town.", []string{"Golden Wok"}},
		{"In late 1969, Zappa broke up the band.", []string{"Zappa"}},
		{"你认识孟美岐吗", []string{"孟美岐"}},
		{"我想吃海底捞", []string{"海底捞"}},
		{"售价5999元起", nil},
		{"电池容量为4750毫安时，支持66W快充", []string{"电池容量", "支持", "快充"}},
		{"荣耀90怎么样", []string{"荣耀90"}},
		{"It was released on July 1907.", nil},
	}
	for _, tc := range tests {
		var got []string
		for _, e := range entities(tc.text) {
			if e.kind != entNameInitial {
				got = append(got, e.text)
			}
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("entities(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func TestRewriteIgnoresCitations(t *testing.T) {
	history := []convo.Message{
		{Role: convo.RoleUser, Content: "What does the relevance filter drop?"},
		{Role: convo.RoleAssistant, Content: labelEN + " From the knowledge base:\n- falls back to the relevance filter's verdicts; [README.md#9-5dd9ef58c81c]\n- below `similarityThreshold` → dropped [README.md#8-3f45b412dc34]"},
	}
	r := Rewrite("What does it keep?", history)
	if strings.Contains(r.Query, "5dd9") || strings.Contains(r.Topic, "README") || strings.Contains(r.Topic, "#") {
		t.Errorf("Rewrite = %+v: a citation id became the topic", r)
	}
}

// The Mate60 conversation of issue 23 as the offline engine answers it: a
// quoted sentence, then a bare heading.
var mate60 = talk.Turns("介绍下华为Mate60", labelZH+"知识库摘录：\n- 华为Mate60是华为于2023年发布的旗舰手机，搭载麒麟9000s芯片。 [mate60.md#0-aa]",
	"它的续航怎么样？", labelZH+"知识库摘录：\n- ## 电池与续航 [mate60.md#2-cc]")

// TestRewriteTopicNotFromEngine: a topic is never taken from the engine's
// own text, its labels, the user's command words or numbers (issue 23,
// item 2).
func TestRewriteTopicNotFromEngine(t *testing.T) {
	greeted := talk.Turns("你好", labelZH+"你好！我以离线模式运行，没有语言模型，只能摘录知识库中的内容。想了解什么？")
	tables := talk.Turns("数据库里有多少张表", "共 14 张表，1200 行：customers 100、orders 300。（每张表一条 SELECT count(*)）")
	tests := []struct {
		name, question string
		history        []convo.Message
		want           string // the query; "" for the question unchanged
		notTopic       []string
	}{
		{"after a heading-only answer", "屏幕呢？", mate60, "华为Mate60的屏幕呢？", []string{"知识库摘录", "电池与续航"}},
		{"a relation after a heading-only answer", "它的下一代是什么？", mate60, "华为Mate60的下一代是什么？", []string{"知识库摘录"}},
		{"the engine's greeting", "它的价格是多少？", greeted, "", []string{"以离线模式运行", "离线模式"}},
		{"the engine's greeting, a detail", "价格呢？", greeted, "", []string{"以离线模式运行"}},
		{"a count with its unit", "有哪些表？", tables, "数据库有哪些表？", []string{"张表", "表一条", "SELECT"}},
		{"a command and a progress line", "那它的价格呢？", talk.Turns("继续", "已完成：15 步 (run_sql ×5)"), "", []string{"继续", "已完成"}},
		{"an English command", "how much is it?", talk.Turns("Tell me about the Pixel 8", "The Pixel 8 is Google's phone.", "Continue", "Done."), "how much is Pixel 8?", []string{"Continue"}},
		{"the English label and lead-in", "what does it cost?", talk.Turns("Tell me about the Pixel 8",
			labelEN+" From the knowledge base:\n- ## Pricing [pixel.md#1-aa]\n- The Pixel 8 costs $699. [pixel.md#2-bb]"), "what does Pixel 8 cost?", []string{"From", "Pricing"}},
		{"a section label and quantities", "屏幕呢？", talk.Turns("介绍下华为Mate60", "华为Mate60是一款旗舰手机。", "它的续航怎么样？",
			labelZH+"知识库摘录：\n- 电池与续航：电池容量为4750毫安时，支持66W快充。 [mate60.md#2-cc]"), "华为Mate60的屏幕呢？",
			[]string{"电池与续航", "4750", "毫安时", "66W", "量为"}},
		{"a hyphenated quantity", "Did it last long?", talk.Turns("What about the 7-day trial?", "The 7-day trial ends on its own."), "", []string{"7-day"}},
		{"an age range", "any awards", talk.Turns("who watched it?", "It had a 2.6 rating in the 18-to-49-year-old demographic."), "", []string{"18-to-49-year-old"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Rewrite(tc.question, tc.history)
			want := tc.want
			if want == "" {
				want = tc.question
			}
			if got.Query != want {
				t.Errorf("Query = %q, want %q (%+v)", got.Query, want, got)
			}
			for _, bad := range tc.notTopic {
				if strings.Contains(got.Topic, bad) || strings.Contains(got.Query, bad) && !strings.Contains(tc.question, bad) {
					t.Errorf("topic %q (query %q) taken from %q", got.Topic, got.Query, bad)
				}
			}
		})
	}
}

// TestRewriteLeavesSelfContained: a question that stands alone is left as
// it is, whatever the history (issue 23, item 2).
func TestRewriteLeavesSelfContained(t *testing.T) {
	haraway := talk.Turns("Donna Haraway", "What did she say in her writings?", "She focused on the metaphors of primatology.")
	tests := []struct {
		name, question string
		history        []convo.Message
	}{
		{"what is X, after the Mate60 turns", "What is ctxflow?", mate60},
		{"what is X, a bare noun", "What is primatology?", haraway},
		{"who is X", "Who is Namor", talk.Turns("Tell me about Franklin Storm", "Storm joined his sister in a space flight.")},
		{"when was X", "When was Brotherhood?", talk.Turns("Was Low-Life an album?", "1985's Low-Life refined the two styles.")},
		{"the antecedent in an earlier sentence", "I am curious why the members all receive the same pay. Isn't it usually different?",
			talk.Turns("How many seasons does Friends have?", "Friends ran for ten seasons.")},
		{"the topic named in lower case", "da vinci pizzeria serves italian food. it is in the north part of town.",
			talk.Turns("I want a cheap restaurant in the north.", "The two restaurants are Da Vinci Pizzeria and Royal Spice.")},
		{"an answer", "Yes please", talk.Turns("I would like a cheap Spanish restaurant.", "La Raza is a cheap Spanish restaurant. Would you like their phone number?")},
		{"I don't know", "I don't know.", talk.Turns("Which French restaurant is closest?", "What area is closer to you, North or Centre?")},
		{"a closing with a demonstrative", "Thank you.  That is all of the info that I needed.  goodbye.", talk.Turns("The address of Little Seoul?", "Little Seoul is at 108 Regent Street.")},
		{"a closing with it", "No, that takes care of it. Thank you for your help.", talk.Turns("The phone number of Restaurant Two Two?", "Restaurant Two Two's number is 01223 351880.")},
		{"of course", "Of course!", talk.Turns("Asian food in the north?", "Saigon City serves Asian Oriental food. Would you like the address?")},
		{"what about a thing it names", "What about installation?", talk.Turns("What is Red Hat OpenShift?", "How does OpenShift help?", "Do I need scripts?")},
		{"how about another cuisine", "How about Italian?", talk.Turns("I want German food.", "There are no German restaurants in the west.")},
		{"a reaction to the answer", "That is too bad.  Although the movement was non-violent, some ended up in violence, right?",
			talk.Turns("Who led the salt march?", "Vallabhbhai Patel was arrested before it.")},
		{"a topic set at the start", "Speaking about vaccines, how are they made?", talk.Turns("How does HIV spread?", "HIV spreads through blood.")},
		{"it standing for the clause after it", "Is it safer to invest in bonds?", talk.Turns("Should I buy discounted company stock?", "Cons of Buying Discounted Company Stock: the risk.")},
		{"it seems", "It seems NASA has invested a lot in its programs. How can all this money help mankind?", talk.Turns("How big is Jupiter?", "Jupiter is the largest planet.")},
		{"not a gerund as the topic", "How do companies hire their employees?",
			talk.Turns("Speaking about good and bad business, what makes a good manager?", "A good manager listens.")},
		{"a name in capitals", "NodeSync", talk.Turns("How can I update a classic worker node?", "Major updates change the version.")},
		{"the user's own costs", "how can I estimate my costs?", talk.Turns("What are the billing plans?", "There are two: Pay-As-You-Go and Subscription.")},
		{"an answer to the last question", "Centre please", talk.Turns("I want Thai food.", "Bangkok City serves Thai food. What area would you like?")},
		{"it possible that", "Is it possible that the cyclones on Jupiter affect the Earth?", talk.Turns("What did Juno and Galileo find?", "Juno and Galileo found cyclones.")},
		{"the topic named in part", "can you give summary of this Deep Impact mission?",
			talk.Turns("What are the scientific objectives of NASA's Deep Impact Extended Mission?", "what about the goal of Deep Impact mission?")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Rewrite(tc.question, tc.history); got.Changed {
				t.Errorf("Rewrite(%q) = %q (topic %q, trigger %q), want it unchanged", tc.question, got.Query, got.Topic, got.Trigger)
			}
		})
	}
}

// TestRewritePlacesAndAttributes: "go there" goes to the place talked
// about, "the address" is the topic's, and the topic is a name, not a
// quantity, a contraction, a phone number or a verb (issue 23, item 2).
func TestRewritePlacesAndAttributes(t *testing.T) {
	coupa := talk.Turns("Where can I get coffee?", "There is a Coupa 6 miles away. Would you like directions?")
	tests := []struct {
		name, question string
		history        []convo.Message
		want           string
	}{
		{"go there", "Thanks, let's go there.", coupa, "Thanks, let's go to Coupa."},
		{"the route there", "Is this the quickest way there?", coupa, "Is this the quickest way to Coupa?"},
		{"the address", "Can you give me the address?", coupa, "Can you give me the address of Coupa?"},
		{"the address of something named", "Can you give me the address of Peets?", coupa, "Can you give me the address of Peets?"},
		{"not a contraction with a number", "Please pick a quick route and let's go there!",
			talk.Turns("I need a pizza place.", "We're 5 miles away from Pizza Hut and 6 miles away from Round Table."), "Please pick a quick route and let's go to Pizza Hut!"},
		{"not a sentence adverb", "Let's navigate there now.",
			talk.Turns("Is there a quick route to it?", "Unfortunately Teavana is the only coffee place I can find."), "Let's navigate to Teavana now."},
		{"not a verb starting a sentence", "What is the address?",
			talk.Turns("Find me groceries", "Safeway is 4 miles away. Pick the quickest route?"), "What is the address of Safeway?"},
		{"not a phone number", "What is the address of it?",
			talk.Turns("Curry Prince?", "The phone number of Curry Prince is 01223 566388."), "What is the address of Curry Prince?"},
		{"not an attribute asked for", "How do I get there?",
			talk.Turns("What is the address?", "Chef Chu's is located at 593 Arrowhead Way."), "How do I get to Chef Chu?"},
		{"a list of details", "Yes, the address and phone number.", coupa, "Yes, the address of Coupa and phone number."},
		{"a list of details with its owner", "Can I get the address and phone number of the missing sock?", coupa,
			"Can I get the address and phone number of the missing sock?"},
		{"a detail set aside", "I don't care about the price range.", coupa, "I don't care about the price range."},
		{"a detail that does not matter", "The price range doesn't matter.", coupa, "The price range doesn't matter."},
		{"an owner that refers back", "What is the phone number for the second one?", coupa, "What is the phone number for the second one (Coupa)?"},
		{"a model number stays", "how much is it?", talk.Turns("Tell me about the iPhone 15 Pro"), "how much is iPhone 15 Pro?"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Rewrite(tc.question, tc.history); got.Query != tc.want {
				t.Errorf("Rewrite(%q) = %q (topic %q), want %q", tc.question, got.Query, got.Topic, tc.want)
			}
		})
	}
}

// TestRewriteShortFollowUps: X呢？ and "what about X?" carry the tracked
// topic when X is an aspect of it, and ask the last question again when X
// is another thing or another time (issue 23, item 2).
func TestRewriteShortFollowUps(t *testing.T) {
	screen := talk.Turns("华为Mate60的屏幕多大？", labelZH+"知识库摘录：\n- 屏幕：6.69英寸 [mate60.md#3-dd]")
	pixel := talk.Turns("How much is the Pixel 8?", labelEN+" From the knowledge base:\n- The Pixel 8 costs $699. [pixel.md#0-aa]")
	tests := []struct {
		name, question string
		history        []convo.Message
		want, topic    string
	}{
		{"an aspect呢", "屏幕呢？", mate60, "华为Mate60的屏幕呢？", "华为Mate60"},
		{"a detail question", "版本是多少呢？", mate60, "华为Mate60的版本是多少呢？", "华为Mate60"},
		{"a price question", "价格呢？", screen, "华为Mate60的价格呢？", "华为Mate60"},
		{"another product呢", "iPhone 15呢？", screen, "iPhone 15的屏幕多大？", "iPhone 15"},
		{"another product呢 after a pronoun", "iPhone 15呢？", mate60, "iPhone 15的续航怎么样？", "iPhone 15"},
		{"another product呢, twice", "Mate70呢？", append(append([]convo.Message(nil), screen...), talk.Turns("iPhone 15呢？", "…")...), "Mate70的屏幕多大？", "Mate70"},
		{"another time呢", "明年呢", talk.Turns("今年是什么年", "猪年"), "明年是什么年", "明年"},
		{"what about an aspect", "what about the price?", talk.Turns("Tell me about the Pixel 8", "It is Google's 2023 phone."), "what about the price of Pixel 8?", "Pixel 8"},
		{"what about another product", "what about the iPhone 15?", pixel, "How much is the iPhone 15?", "iPhone 15"},
		{"and another product", "And the iPhone 15?", pixel, "How much is the iPhone 15?", "iPhone 15"},
		{"what about X with nothing to stand in for", "What about Hebrew?", talk.Turns("how many skills can I create?"), "What about Hebrew?", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Rewrite(tc.question, tc.history)
			if got.Query != tc.want || tc.topic != "" && got.Topic != tc.topic {
				t.Errorf("Rewrite(%q) = %q (topic %q), want %q (topic %q)", tc.question, got.Query, got.Topic, tc.want, tc.topic)
			}
		})
	}
}

// questionWords are the content words of q a rewrite must keep: English
// words but function words and pronouns, and Chinese runes but particles,
// pronouns and fillers.
func questionWords(q string) []string {
	var out []string
	for _, t := range scan(q) {
		switch t.kind {
		case tokWord:
			w := strings.ToLower(t.text)
			if !stopwords[w] && !enPronouns[w] && w != "there" {
				out = append(out, w)
			}
		case tokCJK:
			for _, r := range t.text {
				if !strings.ContainsRune(zhParticles+"它他她们这那个些款部家里儿还有而么", r) {
					out = append(out, string(r))
				}
			}
		}
	}
	return out
}

// TestRewriteKeepsTheQuestion: a rewrite adds to the question and
// resolves its references; it never drops the question's own content
// words, and a question without history is never changed.
func TestRewriteKeepsTheQuestion(t *testing.T) {
	// The fragments of follow-ups besides the shared ones.
	followUps := []string{"what about ", "And ", "那", "呢", "明天", "屏幕", "the address", "go there", "my ", "Speaking about ",
		"That is ", "too bad", "NodeSync", "7-day", "继续"}
	gen := func(n int) *rapid.Generator[string] { return talk.Text(n, followUps...) }
	rapid.Check(t, func(t *rapid.T) {
		q := gen(6).Draw(t, "question")
		h := talk.Turns(rapid.SliceOfN(gen(8), 0, 6).Draw(t, "history")...)
		got := Rewrite(q, h)
		if Rewrite(q, nil).Changed {
			t.Fatalf("Rewrite(%q) without history changed it", q)
		}
		if !got.Changed {
			return
		}
		lower := strings.ToLower(got.Query)
		for _, w := range questionWords(q) {
			if !strings.Contains(lower, w) {
				t.Fatalf("Rewrite(%q) = %q dropped %q", q, got.Query, w)
			}
		}
	})
}
