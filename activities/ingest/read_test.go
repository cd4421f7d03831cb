package ingest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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

func TestReadDocument(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	md := write("a.md", "# Title\n\nSome text.")
	text, hash, err := ReadDocument(md)
	if err != nil || text != "# Title\n\nSome text." || len(hash) != 64 {
		t.Fatalf("markdown: %q %q %v", text, hash, err)
	}
	_, hash2, _ := ReadDocument(write("b.md", "# Title\n\nSome text."))
	if hash2 != hash {
		t.Error("same bytes, different hash")
	}
	if text, _, _ := ReadDocument(write("c.html", "<p>hello <i>world</i></p>")); text != "hello world" {
		t.Errorf("html: %q", text)
	}
	if _, _, err := ReadDocument(write("d.pdf", "%PDF-1.4")); err == nil || !strings.Contains(err.Error(), "PDF") {
		t.Errorf("pdf: %v", err)
	}
	if _, _, err := ReadDocument(filepath.Join(dir, "missing.txt")); err == nil {
		t.Error("missing file: no error")
	}
}
