package offline

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ctxflow/ctxflow/lexical"
)

// passage is a sentence of a document that the answerer may quote, with
// the headings it sits under. Headings are never passages: they name the
// section a sentence came from.
type passage struct {
	doc  int    // the document's index
	pos  int    // the sentence's position in its document
	text string // the sentence
	// section is the nearest heading above the sentence, "" in the
	// document's lead (before its first section).
	section string
	// title is the document's title: a heading on its first line.
	title string
	// lower and lowerSection are text and section in lower case.
	lower, lowerSection string
}

// headingLine is a Markdown ATX heading: "## 屏幕", "# Pixel 8 #".
var headingLine = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)

// listMark is a Markdown list or quote mark at the start of a line.
var listMark = regexp.MustCompile(`^(?:[-*+>]|\d{1,3}[.)])\s+`)

// passages splits document d (index i) into its sentences, each with its
// section heading and the document's title. The first line is the title
// when it is a heading, or a line that reads as a title (see titleLine)
// with more text after it; "华为Mate60 / 价格" is a title and a section.
// Every later heading starts a section. Lines without a letter or digit
// (rules, table borders) are left out, and a sentence repeated (chunks
// overlap) is kept once.
func passages(i int, d Document) []passage {
	var out []passage
	title, section := "", ""
	seen := map[string]bool{}
	lines := nonEmptyLines(d.Text)
	for n, line := range lines {
		if m := headingLine.FindStringSubmatch(line); m != nil || n == 0 && len(lines) > 1 && titleLine(line) {
			name := line
			if m != nil {
				name = m[2]
			}
			if n == 0 {
				title, section, _ = strings.Cut(name, " / ")
			} else {
				section = name
			}
			continue
		}
		line = listMark.ReplaceAllString(line, "")
		for _, s := range lexical.Sentences(line) {
			if !hasContent(s) || seen[s] {
				continue
			}
			seen[s] = true
			out = append(out, passage{doc: i, pos: len(out), text: s, section: section, title: title,
				lower: strings.ToLower(s), lowerSection: strings.ToLower(section)})
		}
	}
	return out
}

// nonEmptyLines are the lines of text that hold more than spaces, trimmed.
func nonEmptyLines(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// titleLine reports whether line reads as a title, not a sentence: short,
// without a sentence's punctuation or a colon, and not a list item.
func titleLine(line string) bool {
	return utf8.RuneCountInString(line) <= 80 && !strings.ContainsAny(line, "。！？；：:!?;") &&
		!strings.HasSuffix(line, ".") && !listMark.MatchString(line)
}

// hasContent reports whether s holds a letter or a digit.
func hasContent(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) })
}

// quoted is how an answer quotes p: the sentence, after the section it
// came from when the sentence does not name it ("电池与续航：…"), and after
// the document's title too when withTitle is set and the sentence does not
// name it (an answer quoting several documents says whose section it is).
func (p passage) quoted(withTitle, zh bool) string {
	var names []string
	if withTitle && p.title != "" && !strings.Contains(p.lower, strings.ToLower(p.title)) {
		names = append(names, p.title)
	}
	if p.section != "" && !strings.Contains(p.lower, p.lowerSection) {
		names = append(names, p.section)
	}
	if len(names) == 0 {
		return p.text
	}
	sep := ": "
	if zh {
		sep = "："
	}
	return strings.Join(names, " / ") + sep + p.text
}
