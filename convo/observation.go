package convo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Observation compression (seed 001, MESSAGE_COMPRESS_MAX_LENGTH and the
// "first 10 items" rule).
const (
	// DefaultObservationMaxChars caps a tool result in the model view.
	DefaultObservationMaxChars = 5000
	// ObservationListItems is how many items of a long JSON list are kept.
	ObservationListItems = 10
)

// observationStringCaps are the per-string caps tried, loosest first, when a
// JSON observation is compressed.
var observationStringCaps = [...]int{500, 200, 50}

// CompressObservation returns what the model sees of a long tool output, at
// most maxChars characters (runes; maxChars <= 0 means
// [DefaultObservationMaxChars]). Text within the cap is returned unchanged,
// so compressing twice changes nothing.
//
// A JSON object or array is compressed structurally, keeping its shape:
// lists longer than [ObservationListItems] keep their first items plus a
// marker string with the total, long strings are cut with a marker, objects
// keep all their keys in order. Whatever is still too long (and plain text)
// is cut in the middle, keeping the head and the tail around a marker that
// says how much was left out. The transcript keeps the full text; only the
// model view is compressed.
func CompressObservation(s string, maxChars int) string {
	if maxChars <= 0 {
		maxChars = DefaultObservationMaxChars
	}
	if utf8.RuneCountInString(s) <= maxChars {
		return s
	}
	trimmed := strings.TrimSpace(s)
	if trimmed != "" && (trimmed[0] == '{' || trimmed[0] == '[') && json.Valid([]byte(trimmed)) {
		for _, strCap := range observationStringCaps {
			out, err := compressJSON(trimmed, strCap)
			if err != nil {
				break
			}
			s = out
			if utf8.RuneCountInString(out) <= maxChars {
				return out
			}
		}
	}
	return cutMiddle(s, maxChars)
}

// cutMiddle keeps about two thirds of the budget from the head and one third
// from the tail.
func cutMiddle(s string, maxChars int) string {
	r := []rune(s)
	if len(r) <= maxChars {
		return s
	}
	marker := func(omitted int) string {
		return fmt.Sprintf("\n…[%d characters omitted]…\n", omitted)
	}
	keep := maxChars - utf8.RuneCountInString(marker(len(r)))
	if keep <= 0 {
		return string(r[:maxChars])
	}
	head := keep * 2 / 3
	tail := keep - head
	return string(r[:head]) + marker(len(r)-keep) + string(r[len(r)-tail:])
}

// compressJSON rewrites one JSON value, preserving key order, with lists cut
// to ObservationListItems items and strings to strCap runes.
func compressJSON(s string, strCap int) (string, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var b bytes.Buffer
	if err := copyValue(dec, &b, strCap); err != nil {
		return "", err
	}
	return b.String(), nil
}

func copyValue(dec *json.Decoder, b *bytes.Buffer, strCap int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return copyArray(dec, b, strCap)
		}
		if v == '{' {
			return copyObject(dec, b, strCap)
		}
		return fmt.Errorf("unexpected %q", v)
	case string:
		writeJSONString(b, cutString(v, strCap))
	case json.Number:
		b.WriteString(v.String())
	case bool:
		fmt.Fprint(b, v)
	case nil:
		b.WriteString("null")
	}
	return nil
}

func copyArray(dec *json.Decoder, b *bytes.Buffer, strCap int) error {
	b.WriteByte('[')
	n := 0
	for dec.More() {
		if n < ObservationListItems {
			if n > 0 {
				b.WriteByte(',')
			}
			if err := copyValue(dec, b, strCap); err != nil {
				return err
			}
		} else {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
		}
		n++
	}
	if _, err := dec.Token(); err != nil { // ']'
		return err
	}
	if n > ObservationListItems {
		b.WriteByte(',')
		writeJSONString(b, fmt.Sprintf("… %d more items (%d total)", n-ObservationListItems, n))
	}
	b.WriteByte(']')
	return nil
}

func copyObject(dec *json.Decoder, b *bytes.Buffer, strCap int) error {
	b.WriteByte('{')
	for first := true; dec.More(); first = false {
		if !first {
			b.WriteByte(',')
		}
		key, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := key.(string)
		writeJSONString(b, k)
		b.WriteByte(':')
		if err := copyValue(dec, b, strCap); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return err
	}
	b.WriteByte('}')
	return nil
}

func cutString(s string, strCap int) string {
	n := utf8.RuneCountInString(s)
	if n <= strCap {
		return s
	}
	r := []rune(s)
	return string(r[:strCap]) + fmt.Sprintf("…[+%d chars]", n-strCap)
}

// writeJSONString writes s as a JSON string without HTML escaping.
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	b.Truncate(b.Len() - 1)
}
