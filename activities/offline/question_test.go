package offline

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// sameWordByConcat is sameWord as first written: the forms built and
// compared.
func sameWordByConcat(a, b string) bool {
	if a == b {
		return true
	}
	for _, suffix := range []string{"s", "es"} {
		if a+suffix == b || b+suffix == a {
			return true
		}
	}
	return strings.HasSuffix(a, "ies") && strings.TrimSuffix(a, "ies")+"y" == b ||
		strings.HasSuffix(b, "ies") && strings.TrimSuffix(b, "ies")+"y" == a
}

// TestSameWordAgreesWithItsDefinition: the allocation-free sameWord
// decides as the forms built and compared, on words made to be close.
func TestSameWordAgreesWithItsDefinition(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		stem := rapid.StringMatching(`[a-z]{0,4}(y|ie|i|e)?`).Draw(t, "stem")
		ends := rapid.SampledFrom([]string{"", "s", "es", "ies", "y", "ys", "e", "ss"})
		a, b := stem+ends.Draw(t, "a"), stem+ends.Draw(t, "b")
		if rapid.Bool().Draw(t, "trim") && b != "" {
			b = b[:len(b)-1]
		}
		if got, want := sameWord(a, b), sameWordByConcat(a, b); got != want {
			t.Fatalf("sameWord(%q, %q) = %v, want %v", a, b, got, want)
		}
	})
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"store", "stores", true}, {"box", "boxes", true}, {"story", "stories", true}, {"stories", "story", true},
		{"price", "prices", true}, {"ies", "y", true}, {"is", "i", true}, {"stor", "stories", false}, {"", "s", true}, {"a", "b", false},
	} {
		if got := sameWord(tc.a, tc.b); got != tc.want || got != sameWordByConcat(tc.a, tc.b) {
			t.Errorf("sameWord(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestMentionsScansWordsAsFields: a Latin term is found among the words of
// the text in any plural form, whatever separates them.
func TestMentionsScansWordsAsFields(t *testing.T) {
	for _, tc := range []struct {
		lower, term string
		want        bool
	}{
		{"milvus and the embedded stores hold it", "store", true},
		{"向量库stores里", "store", true},
		{"stories,story;", "story", true},
		{"restore", "store", false},
		{"", "store", false},
		{"storeys", "store", false},
	} {
		if got := mentions(tc.lower, tc.term); got != tc.want {
			t.Errorf("mentions(%q, %q) = %v, want %v", tc.lower, tc.term, got, tc.want)
		}
	}
}
