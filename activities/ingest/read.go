package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/net/html"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// Document is a document read for ingestion: either Text (text, markdown,
// HTML, PDF) or Passages (JSONL), never both.
type Document struct {
	// Hash is the hex SHA-256 of the document's bytes.
	Hash string
	// Bytes is the size of the document's bytes.
	Bytes    int
	Text     string
	Passages []Passage
}

// Extensions are the file extensions ParseDocument knows, lower case. Any
// other extension is read as plain text.
var Extensions = []string{".md", ".markdown", ".txt", ".html", ".htm", ".pdf", ".jsonl", ".ndjson"}

// Supported reports whether ext (e.g. ".md", any case) is one of [Extensions].
func Supported(ext string) bool { return slices.Contains(Extensions, strings.ToLower(ext)) }

// ParseDocument parses a document's bytes by its extension: text and
// markdown are taken as they are; HTML is reduced to its visible text, one
// block element a line; PDF to the text of its pages; JSONL (.jsonl,
// .ndjson) is a file of passages, one JSON object a line (see
// [ParsePassages]). Any other extension is plain text.
func ParseDocument(ext string, b []byte) (Document, error) {
	h := sha256.Sum256(b)
	d := Document{Hash: hex.EncodeToString(h[:]), Bytes: len(b)}
	var err error
	switch strings.ToLower(ext) {
	case ".html", ".htm":
		d.Text = HTMLText(string(b))
	case ".pdf":
		d.Text, err = PDFText(b)
	case ".jsonl", ".ndjson":
		d.Passages, err = ParsePassages(b)
	default:
		d.Text = string(b)
	}
	if err != nil {
		return Document{}, err
	}
	return d, nil
}

// Pieces chunks the document. Text is chunked as a whole; each passage is
// chunked on its own (a chunk never spans two passages), its chunk ids
// derive from the passage id, and its chunks carry the passage's id, title
// and url as metadata.
func (d Document) Pieces(documentID string, tok convo.Tokenizer, opts ChunkOptions) ([]Piece, error) {
	if d.Passages == nil {
		return Chunk(documentID, d.Text, tok, opts)
	}
	var out []Piece
	for _, p := range d.Passages {
		pieces, err := p.Pieces(documentID, len(out), tok, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, pieces...)
	}
	return out, nil
}

// Pieces chunks one passage of a document; first is the index of its first
// chunk in the document. The title, when the text does not already start
// with it, is the first line of the chunked text, so that it is searched
// and embedded with the passage.
func (p Passage) Pieces(documentID string, first int, tok convo.Tokenizer, opts ChunkOptions) ([]Piece, error) {
	text := p.Text
	if p.Title != "" && !strings.HasPrefix(strings.TrimSpace(text), p.Title) {
		text = p.Title + "\n" + text
	}
	pieces, err := Chunk(p.ID, text, tok, opts)
	if err != nil {
		return nil, fmt.Errorf("line %d: passage %q: %w", p.Line, p.ID, err)
	}
	for i := range pieces {
		pc := &pieces[i]
		// The passage id leads (readable, and a prefix to find a passage's
		// chunks by); the hash also covers the document, so that the same
		// passage in two documents gives two chunks.
		h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d\x00%s", documentID, p.ID, i, pc.Text))
		pc.ID = fmt.Sprintf("%s#%d-%s", p.ID, i, hex.EncodeToString(h[:6]))
		pc.Index = first + i
		pc.Metadata = map[string]string{"passage": p.ID}
		if p.Title != "" {
			pc.Metadata["title"] = p.Title
		}
		if p.URL != "" {
			pc.Metadata["url"] = p.URL
		}
	}
	return pieces, nil
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

// Parser is the workers' [activities.DocumentParser]: [ParseDocument], then
// [Document.Pieces] with Options, counting tokens with Tokenizer.
type Parser struct {
	Tokenizer convo.Tokenizer
	Options   ChunkOptions
}

var _ activities.DocumentParser = Parser{}

// Parse reads and chunks a document.
func (p Parser) Parse(documentID, ext string, data []byte) ([]activities.Piece, error) {
	doc, err := ParseDocument(ext, data)
	if err != nil {
		return nil, err
	}
	pieces, err := doc.Pieces(documentID, p.Tokenizer, p.Options)
	if err != nil {
		return nil, fmt.Errorf("chunk: %w", err)
	}
	out := make([]activities.Piece, len(pieces))
	for i, pc := range pieces {
		out[i] = activities.Piece{ID: pc.ID, Index: pc.Index, Text: pc.Text, Metadata: pc.Metadata}
	}
	return out, nil
}
