package convo

import "unicode"

// Intent labels of a turn (seed 002, component 1): the classifier's
// vocabulary and the session's.
const (
	IntentQA       = "qa"
	IntentChitchat = "chitchat"
	IntentTask     = "task"
	IntentContinue = "continue"
	IntentClarify  = "clarify"
)

// IntentLabel is an intent the classifier can give: its description and
// examples are what it compares a question with.
type IntentLabel struct {
	Label       string
	Description string
	Examples    []string
}

// DefaultIntents are the session's intent labels.
var DefaultIntents = []IntentLabel{
	{IntentQA, "a question asking for facts or an explanation: what, which, how much, how, why, does it; 什么 哪 多少 怎么 为什么 吗 介绍",
		[]string{"华为Mate60多少钱？", "介绍下华为Mate60", "它的屏幕多大？", "哪款手机支持卫星通话？", "什么是向量数据库？", "这款手机的续航怎么样？",
			"What is the battery life of the iPhone 15?", "How do I reset my password?", "Which phone has the larger screen?",
			"What does error code 503 mean?", "Does it support wireless charging?", "Why is the sky blue?", "What is Temporal?"}},
	{IntentChitchat, "greetings, thanks, goodbyes and small talk that ask for nothing",
		[]string{"你好", "谢谢", "再见", "早上好", "你是谁？", "哈哈", "辛苦了", "hello", "thanks!", "how are you?", "good morning", "bye", "who are you?", "nice to meet you"}},
	{IntentTask, "a request to carry out a job over data or tools: count, list, query, find, compute, compare, analyse, generate a report; 统计 查询 列出 计算 分析 生成 帮我",
		[]string{"统计每个城市的客户数量", "查询上个月销售额最高的产品", "帮我查一下订单表里有多少条记录", "列出数据库里所有的表", "生成一份销售报告",
			"Count the customers in Berlin", "List all tables in the database", "Find the top 5 products by revenue",
			"Analyse the orders of 2023 and summarise them", "Compute the average order value per country"}},
	{IntentContinue, "go on with the task that paused",
		[]string{"继续", "请继续", "接着做", "接着上次的任务", "continue", "go on", "keep going", "resume the task", "carry on"}},
	{IntentClarify, "too vague to answer or act on without asking what is meant",
		[]string{"怎么办", "这个", "那个", "什么意思", "怎么弄", "what?", "huh?", "what now?", "?"}},
}

// HasHan reports whether s has a Chinese character: the conversation's
// language is Chinese for the messages ctxflow writes itself.
func HasHan(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Han, r) {
			return true
		}
	}
	return false
}
