package ollamatest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ollama/ollama/fs/ggml"
)

func TestWriteTinyGGUF(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
	for _, p := range []string{a, b} {
		if err := WriteTinyGGUF(p, Seed); err != nil {
			t.Fatal(err)
		}
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Error("two files written with the same seed differ")
	}
	if n := len(ab); n < 300<<10 || n > 700<<10 {
		t.Errorf("file is %d bytes, want a few hundred KB", n)
	}

	f, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := ggml.Decode(f, -1)
	if err != nil {
		t.Fatalf("Ollama cannot decode the file: %v", err)
	}
	kv := m.KV()
	if got := kv.Architecture(); got != "llama" {
		t.Errorf("architecture %q, want llama", got)
	}
	if got := kv.EmbeddingLength(); got != EmbeddingLength {
		t.Errorf("embedding length %d, want %d", got, EmbeddingLength)
	}
	if got := len(kv.Strings("tokenizer.ggml.tokens")); got != VocabSize {
		t.Errorf("%d tokens, want %d", got, VocabSize)
	}
	if got := len(m.Tensors().Items()); got != 3+9*blockCount {
		t.Errorf("%d tensors, want %d", got, 3+9*blockCount)
	}

	if err := WriteTinyGGUF(b, Seed+1); err != nil {
		t.Fatal(err)
	}
	if bb, _ = os.ReadFile(b); bytes.Equal(ab, bb) {
		t.Error("another seed gave the same file")
	}
}

func TestModelfileNumPredict(t *testing.T) {
	if want := fmt.Sprintf("PARAMETER num_predict %d\n", DefaultNumPredict); !strings.Contains(Modelfile, want) {
		t.Errorf("Modelfile lacks %q", want)
	}
}
