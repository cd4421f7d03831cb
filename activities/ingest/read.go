package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/net/html"
)

// ReadDocument returns a document's text and a hash of its bytes. Text and
// markdown are taken as they are; HTML is reduced to its visible text, one
// block element a line. PDF is refused with a clear error.
func ReadDocument(path string) (text, hash string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	h := sha256.Sum256(b)
	text = string(b)
	switch strings.ToLower(filepath.Ext(path)) {
	case ".html", ".htm":
		text = HTMLText(text)
	case ".pdf":
		return "", "", errors.New("PDF is not supported yet: convert it to text first")
	}
	return text, hex.EncodeToString(h[:]), nil
}

var blockTags = map[string]bool{
	"p": true, "div": true, "br": true, "li": true, "tr": true, "h1": true, "h2": true, "h3": true,
	"h4": true, "h5": true, "h6": true, "section": true, "article": true, "pre": true, "blockquote": true, "title": true,
	"td": true, "th": true, "ul": true, "ol": true, "table": true, "header": true, "footer": true,
}

// HTMLText returns the visible text of an HTML document: script and style
// are dropped, block elements end lines, runs of blank lines are folded.
func HTMLText(doc string) string {
	z := html.NewTokenizer(strings.NewReader(doc))
	var b strings.Builder
	skip := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			return foldBlankLines(b.String())
		case html.TextToken:
			if skip == 0 {
				b.Write(z.Text()) // spaces are folded per line at the end
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			switch tag := string(name); {
			case tag == "script" || tag == "style":
				skip++
			case blockTags[tag]:
				b.WriteString("\n")
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch tag := string(name); {
			case tag == "script" || tag == "style":
				skip = max(skip-1, 0)
			case blockTags[tag]:
				b.WriteString("\n")
			}
		}
	}
}

func foldBlankLines(s string) string {
	lines := strings.Split(s, "\n")
	out := lines[:0]
	for _, l := range lines {
		l = strings.Join(strings.Fields(l), " ")
		if l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
