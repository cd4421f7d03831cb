package ollamatest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"github.com/ollama/ollama/fs/ggml"
)

// The shape of the tiny test model: a two-layer llama with a byte-level
// vocabulary. Every tensor is F32; the file is about 470 KB.
const (
	// VocabSize is the number of tokens: <unk>, <s>, </s>, the 256 byte
	// tokens <0x00>..<0xFF> and the word-boundary piece "▁".
	VocabSize = 3 + 256 + 1
	// EmbeddingLength is the hidden size, and so the length of the vectors
	// /api/embed returns for the model.
	EmbeddingLength = 64
	// ContextLength is the model's training context, which caps num_ctx.
	ContextLength = 2048

	blockCount     = 2
	feedForward    = 128
	headCount      = 4
	headCountKV    = 4
	headDim        = EmbeddingLength / headCount
	tokenUnknown   = 0
	tokenBOS       = 1
	tokenEOS       = 2
	tokenFirstByte = 3
)

// SentencePiece token types, as llama.cpp reads tokenizer.ggml.token_type.
const (
	tokenTypeNormal  = 1
	tokenTypeUnknown = 2
	tokenTypeControl = 3
	tokenTypeByte    = 6
)

// WriteTinyGGUF writes a random-weight llama model in GGUF to path with
// Ollama's own writer (github.com/ollama/ollama/fs/ggml). The weights are
// drawn from a PCG generator seeded with seed, so a seed always gives the
// same file. The model answers nonsense but exercises the real inference
// path: tokenizer, prompt evaluation, sampling, grammars and embeddings.
func WriteTinyGGUF(path string, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 0x637478666c6f77)) // "ctxflow"

	tokens := make([]string, 0, VocabSize)
	types := make([]int32, 0, VocabSize)
	tokens = append(tokens, "<unk>", "<s>", "</s>")
	types = append(types, tokenTypeUnknown, tokenTypeControl, tokenTypeControl)
	for b := range 256 {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, tokenTypeByte)
	}
	tokens = append(tokens, "\u2581")
	types = append(types, tokenTypeNormal)
	scores := make([]float32, VocabSize)

	kv := ggml.KV{
		"general.architecture":                   "llama",
		"general.name":                           "ctxflow-tiny",
		"general.file_type":                      uint32(0), // all F32
		"llama.context_length":                   uint32(ContextLength),
		"llama.embedding_length":                 uint32(EmbeddingLength),
		"llama.block_count":                      uint32(blockCount),
		"llama.feed_forward_length":              uint32(feedForward),
		"llama.attention.head_count":             uint32(headCount),
		"llama.attention.head_count_kv":          uint32(headCountKV),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"llama.rope.dimension_count":             uint32(headDim),
		"llama.rope.freq_base":                   float32(10000),
		"llama.vocab_size":                       uint32(VocabSize),
		"tokenizer.ggml.model":                   "llama",
		"tokenizer.ggml.tokens":                  tokens,
		"tokenizer.ggml.scores":                  scores,
		"tokenizer.ggml.token_type":              types,
		"tokenizer.ggml.unknown_token_id":        uint32(tokenUnknown),
		"tokenizer.ggml.bos_token_id":            uint32(tokenBOS),
		"tokenizer.ggml.eos_token_id":            uint32(tokenEOS),
		"tokenizer.ggml.add_bos_token":           true,
		"tokenizer.ggml.add_eos_token":           false,
	}

	// Shapes are GGUF's: the first dimension is the row length (ne0).
	random := func(name string, shape ...uint64) *ggml.Tensor {
		n := uint64(1)
		for _, d := range shape {
			n *= d
		}
		return tensor(name, shape, func(int) float32 { return float32(rng.NormFloat64() * 0.05) }, n)
	}
	ones := func(name string, d uint64) *ggml.Tensor {
		return tensor(name, []uint64{d}, func(int) float32 { return 1 }, d)
	}
	const d, ff, kvDim = EmbeddingLength, feedForward, headDim * headCountKV
	ts := []*ggml.Tensor{
		random("token_embd.weight", d, VocabSize),
		ones("output_norm.weight", d),
		random("output.weight", d, VocabSize),
	}
	for i := range blockCount {
		p := fmt.Sprintf("blk.%d.", i)
		ts = append(ts,
			ones(p+"attn_norm.weight", d),
			random(p+"attn_q.weight", d, d),
			random(p+"attn_k.weight", d, kvDim),
			random(p+"attn_v.weight", d, kvDim),
			random(p+"attn_output.weight", d, d),
			ones(p+"ffn_norm.weight", d),
			random(p+"ffn_gate.weight", d, ff),
			random(p+"ffn_up.weight", d, ff),
			random(p+"ffn_down.weight", ff, d),
		)
	}

	if err := ggml.WriteGGUF(f, kv, ts); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// tensor builds an F32 tensor of n values; the values are drawn now, in
// order, so that the file does not depend on the order WriteGGUF writes in.
func tensor(name string, shape []uint64, value func(i int) float32, n uint64) *ggml.Tensor {
	buf := make([]byte, 4*n)
	for i := range int(n) {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(value(i)))
	}
	return &ggml.Tensor{Name: name, Kind: 0, Shape: shape, WriterTo: bytes.NewReader(buf)}
}
