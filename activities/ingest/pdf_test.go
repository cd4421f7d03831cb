package ingest

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities/ingest/ingesttest"
)

func TestPDFText(t *testing.T) {
	doc := ingesttest.PDF([][]string{
		{"What is ctxflow?", "It keeps the context (of conversations)."},
		{"华为Mate60的价格是5999元。", "Page two ends here."},
	})
	got, err := PDFText(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := "What is ctxflow?\nIt keeps the context (of conversations).\n华为Mate60的价格是5999元。\nPage two ends here."
	if got != want {
		t.Errorf("PDFText = %q, want %q", got, want)
	}

	// PDF 2.0 headers are read too.
	v2 := bytes.Replace(doc, []byte("%PDF-1.4"), []byte("%PDF-2.0"), 1)
	if got, err := PDFText(v2); err != nil || got != want {
		t.Errorf("PDF 2.0: %q, %v", got, err)
	}
}

func TestPDFTextErrors(t *testing.T) {
	valid := ingesttest.PDF([][]string{{"Hello."}})
	for _, tc := range []struct {
		name string
		doc  []byte
		want string
	}{
		{"not a PDF", []byte("%PDF-1.4"), "PDF"},
		{"garbage", []byte("hello world, this is not a PDF at all, not even close to one"), "PDF"},
		{"truncated", valid[:len(valid)/2], "PDF"},
		{"no text", ingesttest.PDF([][]string{{}}), "no extractable text"},
		{"bad xref", bytes.Replace(valid, []byte("startxref\n"), []byte("startxref\n9"), 1), "PDF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := PDFText(tc.doc); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// PDFs on which the parser would loop forever are refused at once.
func TestPDFTextRefusesWhatWouldHang(t *testing.T) {
	const font = "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
	page := func(parent int, content string) string {
		return fmt.Sprintf("<< /Type /Page /Parent %d 0 R /Resources << /Font << /F1 4 0 R >> >> /Contents %s >>", parent, content)
	}
	for _, tc := range []struct {
		name string
		objs []string
		want string
	}{
		{"open hex string", []string{
			"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
			page(2, "5 0 R"), font, ingesttest.Stream("BT /F1 12 Tf (Hello) Tj <48656c6c"),
		}, "hex string is not closed"},
		{"open hex string across an array of streams", []string{
			"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
			page(2, "[5 0 R 6 0 R]"), font, ingesttest.Stream("BT /F1 12 Tf (Hi) Tj"), ingesttest.Stream("<4"),
		}, "hex string is not closed"},
		{"open hex string in a CMap", []string{
			"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
			"<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 4 0 R >> >> /Contents 6 0 R >>",
			"<< /Type /Font /Subtype /Type0 /Encoding /Identity-H /ToUnicode 5 0 R >>",
			ingesttest.Stream("1 begincodespacerange <0000> <FFFF"), ingesttest.Stream("BT /F1 12 Tf <0001> Tj ET"),
		}, "ToUnicode"},
		{"cyclic page tree", []string{
			"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>",
			page(2, "5 0 R"), font, ingesttest.Stream("BT /F1 12 Tf (Hello) Tj ET"),
		}, "cyclic"},
		{"cyclic parents", []string{
			"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 /Parent 6 0 R >>",
			page(2, "5 0 R"), font, ingesttest.Stream("BT /F1 12 Tf (Hello) Tj ET"), "<< /Type /Pages /Parent 2 0 R >>",
		}, "cyclic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := PDFText(ingesttest.Assemble(tc.objs))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one mentioning %q", err, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
	// Closed strings, comments and dictionaries are fine.
	ok := ingesttest.Assemble([]string{
		"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		page(2, "5 0 R"), font, ingesttest.Stream("% a comment with < in it\nBT /F1 12 Tf (a \\( < paren) Tj <48 69> Tj << /K 1 >> pop ET"),
	})
	if text, err := PDFText(ok); err != nil || text != "a ( < parenHi" {
		t.Errorf("PDFText = %q, %v", text, err)
	}
}

// FuzzPDFText: no input panics the caller.
func FuzzPDFText(f *testing.F) {
	f.Add(ingesttest.PDF([][]string{{"Hello.", "你好。"}}))
	f.Add([]byte("%PDF-1.4\n%%EOF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = PDFText(b)
	})
}

// A small PDF that inflates to 100 MB is refused while streaming: the
// extraction allocates a fraction of what the streams inflate to.
func TestInflatingPDFIsRefusedWithoutBeingHeld(t *testing.T) {
	b := ingesttest.InflatingPDF(100 << 20)
	if len(b) > 1<<20 {
		t.Fatalf("the bomb is %d bytes", len(b))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := PDFText(b)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "inflate to over") {
		t.Fatalf("PDFText = %v, want it refused as inflating past the bound", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
		t.Errorf("refusing a %d-byte PDF allocated %d MB", len(b), alloc>>20)
	}
}
