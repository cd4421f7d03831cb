// Package ingesttest builds test documents for the ingestion tests.
package ingesttest

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"strings"
	"unicode/utf16"
)

// PDF writes a minimal valid PDF: one page per element of pages, one
// text object per line. Lines of ASCII use Helvetica (WinAnsiEncoding);
// other lines a Type0 font with a ToUnicode CMap, as CJK PDFs do.
func PDF(pages [][]string) []byte {
	var objs []string // objs[i] is object i+1
	add := func(s string) int { objs = append(objs, s); return len(objs) }
	catalog := add("") // filled in below
	pagesObj := add("")
	helv := add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")

	isASCII := func(l string) bool {
		for _, r := range l {
			if r > 127 {
				return false
			}
		}
		return true
	}
	// The runes of non-ASCII lines get 2-byte codes 1, 2, ... mapped back
	// by the CMap.
	codes := map[rune]int{}
	var order []rune
	for _, p := range pages {
		for _, l := range p {
			for _, r := range l {
				if _, ok := codes[r]; !ok && !isASCII(l) {
					order = append(order, r)
					codes[r] = len(order)
				}
			}
		}
	}
	var cm strings.Builder
	cm.WriteString("/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n/CMapName /Test def\n")
	cm.WriteString("1 begincodespacerange\n<0000> <FFFF>\nendcodespacerange\n")
	fmt.Fprintf(&cm, "%d beginbfchar\n", len(order))
	for _, r := range order {
		fmt.Fprintf(&cm, "<%04X> <", codes[r])
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&cm, "%04X", u)
		}
		cm.WriteString(">\n")
	}
	cm.WriteString("endbfchar\nendcmap\nCMapName currentdict /CMap defineresource pop\nend\nend")
	toUnicode := add(Stream(cm.String()))
	cjk := add(fmt.Sprintf("<< /Type /Font /Subtype /Type0 /BaseFont /STSong-Light /Encoding /Identity-H /ToUnicode %d 0 R >>", toUnicode))

	var kids []string
	for _, p := range pages {
		var c strings.Builder
		for i, l := range p {
			if isASCII(l) {
				esc := strings.NewReplacer(`\`, `\\`, "(", `\(`, ")", `\)`).Replace(l)
				fmt.Fprintf(&c, "BT /F1 12 Tf 72 %d Td (%s) Tj ET\n", 720-20*i, esc)
				continue
			}
			fmt.Fprintf(&c, "BT /F2 12 Tf 72 %d Td <", 720-20*i)
			for _, r := range l {
				fmt.Fprintf(&c, "%04X", codes[r])
			}
			c.WriteString("> Tj ET\n")
		}
		content := add(Stream(c.String()))
		page := add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 %d 0 R /F2 %d 0 R >> >> /Contents %d 0 R >>",
			pagesObj, helv, cjk, content))
		kids = append(kids, fmt.Sprintf("%d 0 R", page))
	}
	objs[catalog-1] = fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", pagesObj)
	objs[pagesObj-1] = fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(kids))

	return Assemble(objs)
}

// Assemble writes a PDF of the given objects (object i+1 is objs[i];
// object 1 is the catalog) with a correct cross-reference table.
func Assemble(objs []string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// FlateStream is the text of a stream object holding data deflated
// (/FlateDecode): a little PDF can inflate to a lot.
func FlateStream(data []byte) string {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	_, _ = w.Write(data)
	_ = w.Close()
	return fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", z.Len(), z.Bytes())
}

// InflatingPDF is a one-page PDF whose content stream, a text operator
// repeated, inflates to about size bytes.
func InflatingPDF(size int) []byte {
	op := []byte("BT /F1 12 Tf 72 720 Td (All work and no play makes Jack a dull boy.) Tj ET\n")
	content := bytes.Repeat(op, size/len(op)+1)
	return Assemble([]string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
		FlateStream(content),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
	})
}

// Stream is the text of a stream object holding data.
func Stream(data string) string {
	return fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(data), data)
}
