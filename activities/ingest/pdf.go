package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/ledongthuc/pdf"
)

// Bounds of PDF text extraction. The parser (github.com/ledongthuc/pdf) is
// pure Go but not hardened against hostile files: it loops forever on some
// malformed ones. [PDFText] refuses the cases known to loop before parsing
// (see pdfGuard), bounds the work, and as a last resort runs extraction on
// its own goroutine and abandons it after PDFTimeout.
var (
	PDFTimeout      = time.Minute
	MaxPDFPages     = 10000
	MaxPDFTextBytes = 64 << 20
	// MaxPDFStreamBytes bounds the decompressed bytes of the content and
	// CMap streams of a document: they are measured by streaming before the
	// parser inflates them in memory, so a small file that inflates to
	// gigabytes is refused without ever being held.
	MaxPDFStreamBytes int64 = 64 << 20

	errPDFNoText     = errors.New("PDF has no extractable text (a scanned PDF needs OCR first)")
	errPDFEncrypted  = errors.New("PDF is encrypted: decrypt it first")
	errPDFTooComplex = errors.New("PDF text extraction did not finish in time (malformed or too complex a file)")
)

// pdfSlots bounds the PDFs parsed at once in a process: the parser holds
// a document's inflated streams in memory several times over, so the
// worker's memory is bounded by one document's, not by the number of
// uploads.
var pdfSlots = make(chan struct{}, 1)

// PDFText returns the text of a PDF's pages, a page after the other, with
// blank lines folded. A PDF without text (scanned pages) is an error. PDFs
// are parsed one at a time per process, and the memory a large one took is
// handed back to the system when it is done.
func PDFText(b []byte) (string, error) {
	type result struct {
		text string
		err  error
	}
	timer := time.NewTimer(PDFTimeout)
	defer timer.Stop()
	select {
	case pdfSlots <- struct{}{}:
	case <-timer.C:
		return "", errPDFTooComplex
	}
	defer func() { <-pdfSlots }()
	done := make(chan result, 1)
	go func() {
		text, err := pdfText(b)
		done <- result{text, err}
	}()
	select {
	case r := <-done:
		if len(b) > 1<<20 || len(r.text) > 8<<20 {
			debug.FreeOSMemory()
		}
		return r.text, r.err
	case <-timer.C:
		return "", errPDFTooComplex
	}
}

func pdfText(b []byte) (text string, err error) {
	defer func() {
		if v := recover(); v != nil {
			text, err = "", fmt.Errorf("malformed PDF: %v", v)
		}
	}()
	// The parser knows headers up to %PDF-1.7; a PDF 2.0 file has the same
	// structure as far as text goes, so it is read as 1.7 (same length:
	// offsets are unchanged).
	if bytes.HasPrefix(b, []byte("%PDF-2.")) {
		b = append([]byte("%PDF-1.7"), b[len("%PDF-1.7"):]...)
	}
	r, err := pdf.NewReader(bytes.NewReader(b), int64(len(b)))
	switch {
	case errors.Is(err, pdf.ErrInvalidPassword):
		return "", errPDFEncrypted
	case err != nil:
		return "", fmt.Errorf("read PDF: %w", err)
	}
	g := &pdfGuard{budget: MaxPDFStreamBytes}
	pages, err := g.pages(r)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	for i, p := range pages {
		if err := g.check(p); err != nil {
			return "", fmt.Errorf("PDF page %d: %w", i+1, err)
		}
		// Fonts are per page: two pages may use one resource name for
		// different fonts.
		t, err := p.GetPlainText(nil)
		if err != nil {
			return "", fmt.Errorf("PDF page %d: %w", i+1, err)
		}
		out.WriteString(t)
		out.WriteString("\n")
		if out.Len() > MaxPDFTextBytes {
			return "", fmt.Errorf("PDF text is over %d bytes: split it", MaxPDFTextBytes)
		}
	}
	text = foldBlankLines(out.String())
	if strings.TrimSpace(text) == "" {
		return "", errPDFNoText
	}
	return text, nil
}

// pdfGuard checks a PDF for what would make the parser loop forever or
// work without bound: a cycle or a very deep chain in the page tree
// (it walks Kids and Parent links without a bound), a hex string left open
// at the end of a content or CMap stream (its lexer then reads spaces
// forever), streams that inflate past the budget.
type pdfGuard struct {
	budget int64 // decompressed stream bytes left
}

const maxPDFTreeDepth = 64

// pages returns the pages in order, walking the page tree with bounds
// instead of the parser's unbounded Reader.Page.
func (g *pdfGuard) pages(r *pdf.Reader) ([]pdf.Page, error) {
	var out []pdf.Page
	visits := 0
	var walk func(v pdf.Value, depth int) error
	walk = func(v pdf.Value, depth int) error {
		if visits++; depth > maxPDFTreeDepth || visits > 4*MaxPDFPages+1000 {
			return errors.New("malformed PDF: the page tree is cyclic or too deep")
		}
		switch v.Key("Type").Name() {
		case "Pages":
			kids := v.Key("Kids")
			for i := range kids.Len() {
				if err := walk(kids.Index(i), depth+1); err != nil {
					return err
				}
			}
		case "Page":
			if len(out) == MaxPDFPages {
				return fmt.Errorf("PDF has over %d pages: split it", MaxPDFPages)
			}
			out = append(out, pdf.Page{V: v})
		}
		return nil
	}
	if err := walk(r.Trailer().Key("Root").Key("Pages"), 0); err != nil {
		return nil, err
	}
	return out, nil
}

// check vets what GetPlainText will read on page p.
func (g *pdfGuard) check(p pdf.Page) error {
	v := p.V
	for range maxPDFTreeDepth {
		if v = v.Key("Parent"); v.IsNull() {
			break
		}
	}
	if !v.IsNull() {
		return errors.New("malformed PDF: the page's parents are cyclic or too deep")
	}
	if err := g.scan(p.V.Key("Contents")); err != nil {
		return fmt.Errorf("content stream: %w", err)
	}
	for _, name := range p.Fonts() {
		if cm := p.Font(name).V.Key("ToUnicode"); cm.Kind() == pdf.Stream {
			if err := g.scan(cm); err != nil {
				return fmt.Errorf("font %s: ToUnicode CMap: %w", name, err)
			}
		}
	}
	return nil
}

// scan reads a stream (or an array of streams, read as one, as the parser
// does) and refuses it if a hex string is open at its end.
func (g *pdfGuard) scan(v pdf.Value) error {
	var streams []pdf.Value
	switch v.Kind() {
	case pdf.Stream:
		streams = []pdf.Value{v}
	case pdf.Array:
		for i := range v.Len() {
			streams = append(streams, v.Index(i))
		}
	}
	var lx psLexer
	buf := make([]byte, 32<<10)
	for _, s := range streams {
		rd := s.Reader()
		for !lx.failed {
			n, err := rd.Read(buf)
			if g.budget -= int64(n); g.budget < 0 {
				_ = rd.Close()
				return fmt.Errorf("PDF streams inflate to over %d bytes", MaxPDFStreamBytes)
			}
			lx.feed(buf[:n])
			if err != nil {
				break // the parser stops at the same error (or end)
			}
		}
		_ = rd.Close()
	}
	if lx.inHex() {
		return errors.New("malformed PDF: a hex string is not closed")
	}
	return nil
}

// psLexer follows the parser's lexer over a content stream just enough to
// know whether it ends inside a hex string.
type psLexer struct {
	state  int // one of the ps* states
	depth  int // parentheses open in a literal string
	failed bool
}

const (
	psNormal = iota
	psComment
	psLiteral
	psEscape // after a backslash in a literal string
	psLess   // after '<': a dictionary or a hex string
	psHex    // in a hex string
)

func (l *psLexer) inHex() bool { return !l.failed && (l.state == psLess || l.state == psHex) }

func (l *psLexer) feed(b []byte) {
	for _, c := range b {
		if l.failed {
			return
		}
		switch l.state {
		case psNormal:
			switch c {
			case '%':
				l.state = psComment
			case '(':
				l.state, l.depth = psLiteral, 1
			case '<':
				l.state = psLess
			}
		case psComment:
			if c == '\r' || c == '\n' {
				l.state = psNormal
			}
		case psLiteral:
			switch c {
			case '\\':
				l.state = psEscape
			case '(':
				l.depth++
			case ')':
				if l.depth--; l.depth == 0 {
					l.state = psNormal
				}
			}
		case psEscape:
			l.state = psLiteral
		case psLess:
			if c == '<' {
				l.state = psNormal // a dictionary
				continue
			}
			l.state = psHex
			l.hex(c)
		case psHex:
			l.hex(c)
		}
	}
}

// hex takes a byte of a hex string: the parser ends the string at '>' and
// fails (ending the stream's interpretation) on anything but hex digits
// and spaces.
func (l *psLexer) hex(c byte) {
	switch {
	case c == '>':
		l.state = psNormal
	case c == 0 || c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == ' ':
	case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
	default:
		l.failed = true
	}
}
