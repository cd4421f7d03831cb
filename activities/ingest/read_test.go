package ingest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/activities/ingest/ingesttest"
)

func TestHTMLText(t *testing.T) {
	doc := `<html><head><title>ctxflow</title><style>p{color:red}</style></head>
<body><h1>What is ctxflow?</h1><p>It keeps the <b>context</b> of conversations.</p>
<script>alert("x")</script><ul><li>durable</li><li>fast</li></ul></body></html>`
	want := "ctxflow\nWhat is ctxflow?\nIt keeps the context of conversations.\ndurable\nfast"
	if got := HTMLText(doc); got != want {
		t.Errorf("HTMLText = %q, want %q", got, want)
	}
}

func TestParseDocument(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, body []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	md := write("a.md", []byte("# Title\n\nSome text."))
	d, err := readDocument(md)
	if err != nil || d.Text != "# Title\n\nSome text." || len(d.Hash) != 64 || d.Bytes != 19 || d.Passages != nil {
		t.Fatalf("markdown: %+v %v", d, err)
	}
	if d2, _ := readDocument(write("b.md", []byte("# Title\n\nSome text."))); d2.Hash != d.Hash {
		t.Error("same bytes, different hash")
	}
	if d, _ := readDocument(write("c.HTML", []byte("<p>hello <i>world</i></p>"))); d.Text != "hello world" {
		t.Errorf("html: %q", d.Text)
	}
	if d, err := readDocument(write("d.pdf", ingesttest.PDF([][]string{{"Hello PDF."}}))); err != nil || d.Text != "Hello PDF." {
		t.Errorf("pdf: %q %v", d.Text, err)
	}
	if _, err := readDocument(write("e.pdf", []byte("%PDF-1.4"))); err == nil || !strings.Contains(err.Error(), "PDF") {
		t.Errorf("broken pdf: %v", err)
	}
	d, err = readDocument(write("f.jsonl", []byte(`{"id":"p1","text":"One."}`+"\n"+`{"id":"p2","text":"Two.","title":"T"}`)))
	if err != nil || len(d.Passages) != 2 || d.Text != "" || d.Passages[1].Title != "T" || d.Passages[1].Line != 2 {
		t.Errorf("jsonl: %+v %v", d, err)
	}
	var le *LineError
	if _, err := readDocument(write("g.ndjson", []byte(`{"id":"p1","text":"One."}`+"\n"+`{"id":"p1"`))); !errors.As(err, &le) || le.Line != 2 {
		t.Errorf("bad ndjson: %v", err)
	}
	if d, _ := readDocument(write("h.rst", []byte("Plain *text*."))); d.Text != "Plain *text*." {
		t.Errorf("unknown extension: %q", d.Text)
	}
	if _, err := readDocument(filepath.Join(dir, "missing.txt")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestSupported(t *testing.T) {
	for _, ext := range []string{".md", ".MD", ".markdown", ".txt", ".html", ".htm", ".pdf", ".jsonl", ".ndjson"} {
		if !Supported(ext) {
			t.Errorf("%s not supported", ext)
		}
	}
	for _, ext := range []string{"", ".bin", ".docx", "md"} {
		if Supported(ext) {
			t.Errorf("%q supported", ext)
		}
	}
}

// readDocument parses the document at path as ingestion does: by its
// extension.
func readDocument(path string) (Document, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Document{}, err
	}
	return ParseDocument(filepath.Ext(path), b)
}
