package lexical

import "strings"

// greeting kinds, as answered by [Answer].
const (
	greetHello  = "hello"
	greetThanks = "thanks"
	greetBye    = "bye"
)

// enPhatic are the words of greetings, thanks, goodbyes and
// acknowledgements: a message made only of them carries no request.
var enPhatic = setOf(`hi hello hey hiya greetings morning afternoon evening night good great thank thanks thankyou
ty cheers you goodbye bye byebye see later ok okay k yes yeah yep yup no nope nah sure fine cool perfect excellent awesome
wonderful lovely nice alright right all that that's thats it it's is was be will would that'll i i'm im need needed want
wanted know to for your help helpful have a an day too so very much lot again and sounds sound do does did everything
enough further questions question anything else nothing more this the just then well oh ah got it's appreciate
appreciated care take there welcome think believe guess covered info information i've you've we're you're youre all`)

// zhPhatic are Chinese greetings, thanks, goodbyes and acknowledgements,
// longest first.
var zhPhatic = []string{"早上好", "中午好", "下午好", "晚上好", "没问题", "不用了", "没有了", "就这样", "辛苦了", "谢谢你",
	"谢谢", "多谢", "感谢", "你好", "您好", "哈喽", "再见", "拜拜", "晚安", "好的", "好吧", "好滴", "嗯嗯", "在吗", "在么",
	"可以", "知道了", "明白了", "收到", "行", "好", "嗯", "哦", "噢", "嗨", "哈", "啦", "啊", "呀", "了", "吧", "呢", "你",
	"您", "大家", "早", "谢", "的", "那", "就", "先", "这样"}

var (
	enHello  = setOf("hi hello hey hiya greetings morning afternoon evening")
	enThanks = setOf("thank thanks thankyou ty cheers appreciate appreciated")
	enBye    = setOf("goodbye bye byebye later night")
)

// isSmallTalk reports whether s is only greetings, thanks, goodbyes and
// acknowledgements ("Thank you, goodbye.", "好的谢谢").
func isSmallTalk(s string) bool {
	return smallTalkKind(s) != "" || phaticOnly(s)
}

// phaticOnly reports whether every word of s is phatic.
func phaticOnly(s string) bool {
	seen := false
	for _, t := range scan(s) {
		switch t.kind {
		case tokWord:
			if !enPhatic[strings.ToLower(t.text)] {
				return false
			}
			seen = true
		case tokCJK:
			if strings.TrimSpace(stripPhaticZh(t.text)) != "" {
				return false
			}
			seen = true
		}
	}
	return seen
}

func stripPhaticZh(s string) string {
	for _, p := range zhPhatic {
		s = strings.ReplaceAll(s, p, "")
	}
	return s
}

// smallTalkKind returns the kind of greeting s is (hello, thanks, bye), or
// "" if s is not only small talk or carries none of these. Goodbye wins
// over thanks, thanks over hello.
func smallTalkKind(s string) string {
	if !phaticOnly(s) {
		return ""
	}
	kind := ""
	rank := map[string]int{"": 0, greetHello: 1, greetThanks: 2, greetBye: 3}
	set := func(k string) {
		if rank[k] > rank[kind] {
			kind = k
		}
	}
	for _, t := range scan(s) {
		w := strings.ToLower(t.text)
		switch {
		case enBye[w]:
			set(greetBye)
		case enThanks[w]:
			set(greetThanks)
		case enHello[w]:
			set(greetHello)
		}
	}
	switch {
	case strings.Contains(s, "再见") || strings.Contains(s, "拜拜") || strings.Contains(s, "晚安"):
		set(greetBye)
	case strings.Contains(s, "谢"):
		set(greetThanks)
	case containsAny(s, []string{"你好", "您好", "哈喽", "嗨", "早上好", "中午好", "下午好", "晚上好", "在吗", "在么"}):
		set(greetHello)
	}
	return kind
}
