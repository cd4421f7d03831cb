package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/offline"
	"github.com/ctxflow/ctxflow/activities/vecstore"
	"github.com/ctxflow/ctxflow/workflows"
)

// TestLongQuestionsCostBounded asks questions of the maximum size (32 KB
// of distinct words, Latin and Chinese) on a knowledge base of 20,000
// chunks: each answers, its retrieval done, well within the retrieval's
// one-minute budget; and another session's turns meanwhile stay within
// twice their usual latency. On the code before the bound, keyword
// retrieval grew with the question's length: 32 KB took about three
// minutes a turn and failed ("retrieve failed").
func TestLongQuestionsCostBounded(t *testing.T) {
	s := startStack(t, stackOptions{})
	fillKnowledgeBase(t, s.dataDir, 20000)
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	normal := func(i int) time.Duration {
		t.Helper()
		start := time.Now()
		res, _, err := s.turn(ctx, "usual", fmt.Sprintf("u%d", i), "what does the word "+pseudoWord(uint64(i))+" mean?")
		if err != nil || res.Status != workflows.TurnCompleted {
			t.Fatalf("usual turn %d: %v %+v", i, err, res)
		}
		return time.Since(start)
	}
	var usual []time.Duration
	for i := range 12 {
		if d := normal(i); i >= 2 { // the first ones warm up the worker
			usual = append(usual, d)
		}
	}

	const long = 3
	done := make(chan error, 1)
	go func() {
		for i := range long {
			q := longQuestion(uint64(i), workflows.DefaultMaxQuestionBytes)
			start := time.Now()
			res, _, err := s.turn(ctx, "long", fmt.Sprintf("l%d", i), q)
			took := time.Since(start)
			switch {
			case err != nil || res.Status != workflows.TurnCompleted:
				err = fmt.Errorf("long question %d: %v %+v", i, err, res)
			case len(res.RetrievedDocs) == 0:
				err = fmt.Errorf("long question %d retrieved nothing", i)
			case took > time.Minute:
				err = fmt.Errorf("long question %d took %s, over the retrieval's budget of a minute", i, took)
			}
			if err != nil {
				done <- err
				return
			}
			t.Logf("long question %d (%d bytes): %s, %d documents", i, len(q), took.Round(time.Millisecond), len(res.RetrievedDocs))
		}
		done <- nil
	}()
	var during []time.Duration
	for i := 100; ; i++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if len(during) < 3 {
				during = append(during, normal(i)) // the long ones were quicker than three usual turns
			}
			u, d := quantile(usual, 0.5), quantile(during, 0.5)
			t.Logf("usual turn p50 %s; during the long questions p50 %s (%d turns)", u, d, len(during))
			if d > 2*u+50*time.Millisecond {
				t.Errorf("usual turns took %s (p50) during the long questions, over twice their %s", d, u)
			}
			return
		default:
			during = append(during, normal(i))
		}
	}
}

// fillKnowledgeBase writes n chunks of pseudo-words (and some Chinese) to
// the default collection of the embedded store under dataDir, embedded by
// the offline embedder (the one the worker uses beside the fake model),
// before the worker opens it.
func fillKnowledgeBase(t *testing.T, dataDir string, n int) {
	t.Helper()
	store, err := vecstore.Open(vecstore.Options{Dir: filepath.Join(dataDir, "vectors"), Collection: "rag_documents", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var emb offline.Engine
	rng := rand.New(rand.NewPCG(7, 11))
	zipf := rand.NewZipf(rng, 1.1, 1, vocabulary-1) // as words in text: a few in most chunks
	const batch = 1000
	for i := 0; i < n; i += batch {
		chunks := make([]activities.Chunk, 0, batch)
		texts := make([]string, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			var b strings.Builder
			for range 60 {
				b.WriteString(pseudoWord(zipf.Uint64()))
				b.WriteByte(' ')
			}
			b.WriteString(chineseRun(rng, 20))
			texts = append(texts, b.String())
			chunks = append(chunks, activities.Chunk{
				ID: fmt.Sprintf("kb-%d", j), DocumentID: fmt.Sprintf("doc-%d", j/50), Text: texts[len(texts)-1],
				Metadata: map[string]string{"source": fmt.Sprintf("doc-%d", j/50), activities.MetaTenant: activities.DefaultTenant},
			})
		}
		vecs, err := emb.Embed(t.Context(), "offline", texts)
		if err != nil {
			t.Fatal(err)
		}
		for k := range chunks {
			chunks[k].Vector = vecs[k]
		}
		if err := store.Upsert(t.Context(), chunks); err != nil {
			t.Fatal(err)
		}
	}
	store.WaitIndex() // the worker opens it with its dense index built
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
}

// vocabulary is the number of pseudo-words of the knowledge base.
const vocabulary = 20000

// longQuestion is a question of about size bytes: pseudo-words drawn as
// the knowledge base's are (common ones repeated, the costliest terms to
// search, and many distinct ones), then a run of Chinese characters.
func longQuestion(seed uint64, size int) string {
	rng := rand.New(rand.NewPCG(seed, 3))
	zipf := rand.NewZipf(rng, 1.1, 1, vocabulary-1)
	var b strings.Builder
	b.WriteString("please explain ")
	for b.Len() < size*3/4 {
		b.WriteString(pseudoWord(zipf.Uint64()))
		b.WriteByte(' ')
	}
	for b.Len() < size-4 {
		b.WriteString(chineseRun(rng, 1))
	}
	return b.String() + "?"
}

// pseudoWord is the i-th word of a vocabulary of syllables: "kabeto".
func pseudoWord(i uint64) string {
	const cons, vows = "bdfgklmnprstvz", "aeiou"
	var b strings.Builder
	for n := i + 20; n > 0; n /= 70 {
		d := n % 70
		b.WriteByte(cons[d%14])
		b.WriteByte(vows[d/14])
	}
	return b.String()
}

// chineseRun is n random common CJK characters.
func chineseRun(rng *rand.Rand, n int) string {
	r := make([]rune, n)
	for i := range r {
		r[i] = rune(0x4e00 + rng.IntN(0x1000))
	}
	return string(r)
}
