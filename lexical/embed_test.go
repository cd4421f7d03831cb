package lexical

import (
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/internal/proptest/talk"
)

func cosine(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func norm(v []float32) float64 { return math.Sqrt(cosine(v, v)) }

func TestEmbedDimension(t *testing.T) {
	for _, tc := range []struct {
		e    Embedder
		want int
	}{{Embedder{}, DefaultDim}, {Embedder{Dim: 64}, 64}, {Embedder{Dim: 1024}, 1024}, {Embedder{Dim: -1}, DefaultDim}} {
		vs := tc.e.Embed([]string{"华为Mate60", "Pixel 8", ""})
		if len(vs) != 3 {
			t.Fatalf("%d vectors for 3 texts", len(vs))
		}
		for _, v := range vs {
			if len(v) != tc.want || tc.e.Dimension() != tc.want {
				t.Errorf("Dim %d: vector of %d, Dimension %d, want %d", tc.e.Dim, len(v), tc.e.Dimension(), tc.want)
			}
		}
	}
	if got := (Embedder{}).Embed(nil); len(got) != 0 {
		t.Errorf("no texts: %d vectors", len(got))
	}
}

func TestEmbedNormalised(t *testing.T) {
	vs := Embedder{}.Embed([]string{"华为Mate60的价格", "The Pixel 8 costs $699.", "a", "，。！", ""})
	for i, v := range vs[:3] {
		if n := norm(v); math.Abs(n-1) > 1e-5 {
			t.Errorf("vector %d has norm %v", i, n)
		}
	}
	for i, v := range vs[3:] {
		if n := norm(v); n != 0 {
			t.Errorf("featureless text %d: norm %v, want the zero vector", i+3, n)
		}
	}
}

func TestEmbedSimilarity(t *testing.T) {
	tests := []struct{ text, similar, unrelated string }{
		{"华为Mate60的价格是多少", "华为Mate60售价5999元", "今天北京天气晴朗"},
		{"它的配置呢", "华为Mate60的配置", "我想吃海底捞"},
		{"How much does the Pixel 8 cost?", "The Pixel 8 costs $699.", "The Golden Wok is in the north part of town."},
		{"restaurants in the north", "a restaurant in the north part of town", "Frank Zappa disbanded the Mothers of Invention"},
	}
	e := Embedder{}
	for _, tc := range tests {
		vs := e.Embed([]string{tc.text, tc.similar, tc.unrelated})
		sim, unrel := cosine(vs[0], vs[1]), cosine(vs[0], vs[2])
		t.Logf("%q: similar %.3f, unrelated %.3f", tc.text, sim, unrel)
		if sim <= unrel {
			t.Errorf("%q: cos to %q = %.3f, not above cos to %q = %.3f", tc.text, tc.similar, sim, tc.unrelated, unrel)
		}
	}
}

func TestEmbedProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		dim := rapid.IntRange(1, 512).Draw(t, "dim")
		texts := rapid.SliceOfN(rapid.OneOf(talk.Text(10), rapid.String()), 0, 5).Draw(t, "texts")
		e := Embedder{Dim: dim}
		vs := e.Embed(texts)
		if len(vs) != len(texts) {
			t.Fatalf("%d vectors for %d texts", len(vs), len(texts))
		}
		again := e.Embed(texts)
		for i, v := range vs {
			if len(v) != dim {
				t.Fatalf("vector of %d, want %d", len(v), dim)
			}
			if n := norm(v); n != 0 && math.Abs(n-1) > 1e-5 {
				t.Fatalf("norm %v", n)
			}
			if !slices.Equal(v, again[i]) {
				t.Fatal("not deterministic")
			}
			// A text's vector does not depend on the other texts.
			if one := e.Embed(texts[i : i+1])[0]; !slices.Equal(v, one) {
				t.Fatal("vector depends on the batch")
			}
		}
	})
}
