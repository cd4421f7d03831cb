package vecstore

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/activities"
)

func batch(doc string, from, n int) []activities.Chunk {
	out := make([]activities.Chunk, n)
	for i := range out {
		id := fmt.Sprintf("%s#%d", doc, from+i)
		out[i] = activities.Chunk{ID: id, DocumentID: doc, Text: "chunk " + id + " of the quokka manual",
			Vector: []float32{float32(from + i + 1), 1, 0}, Metadata: map[string]string{"source": doc}}
	}
	return out
}

// A process killed mid-write leaves a torn last record: Open cuts it off,
// logs it, and the store goes on (the batch is written again by its
// retried activity). Any cut of the log's last record opens.
func TestTornLogOpensWithTheGoodRecords(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, Options{Dir: dir, Collection: "kb"})
	if err := s.Upsert(ctx, batch("d1", 0, 5)); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "kb", logName)
	fi, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	good := fi.Size()
	if err := s.Upsert(ctx, batch("d2", 0, 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int64{good + 1, good + frameHeader, good + frameHeader + 7, int64(len(full)) - 1} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			if err := os.WriteFile(logPath, full[:cut], 0o600); err != nil {
				t.Fatal(err)
			}
			var logged bytes.Buffer
			s, err := Open(Options{Dir: dir, Collection: "kb", Logger: slog.New(slog.NewTextHandler(&logged, nil))})
			if err != nil {
				t.Fatalf("Open after a torn write: %v", err)
			}
			defer s.Close()
			if !strings.Contains(logged.String(), "chunk log damaged") {
				t.Errorf("the damage was not logged: %q", logged.String())
			}
			info, _ := s.Info(ctx)
			want := 5 // d2's batch is torn
			if cut == int64(len(full))-1 {
				want = 5 + 2 // only the last of d2's three records is torn
			}
			if info.Count != want {
				t.Errorf("count = %d, want %d", info.Count, want)
			}
			// The retried batch goes in, and the next Open finds no damage.
			if err := s.Upsert(ctx, batch("d2", 0, 3)); err != nil {
				t.Fatal(err)
			}
			s.Close()
			logged.Reset()
			s2, err := Open(Options{Dir: dir, Collection: "kb", Logger: slog.New(slog.NewTextHandler(&logged, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			if info, _ := s2.Info(ctx); info.Count != 8 || logged.Len() != 0 {
				t.Errorf("after the retry: count %d, log %q", info.Count, logged.String())
			}
			hits, err := s2.Search(ctx, activities.SearchRequest{Text: "quokka manual d2", Vector: []float32{1, 1, 0}, TopK: 8})
			if err != nil || len(hits) != 8 {
				t.Errorf("search after the repair: %d hits, %v", len(hits), err)
			}
		})
	}
}

// A flipped byte fails the record's checksum: the store opens without it.
func TestCorruptRecordIsSkipped(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, Options{Dir: dir, Collection: "kb"})
	if err := s.Upsert(ctx, batch("d1", 0, 4)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	logPath := filepath.Join(dir, "kb", logName)
	b, _ := os.ReadFile(logPath)
	b[len(b)-3] ^= 0xff
	if err := os.WriteFile(logPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := openT(t, Options{Dir: dir, Collection: "kb"})
	if info, _ := s2.Info(ctx); info.Count != 3 {
		t.Errorf("count = %d, want 3", info.Count)
	}
}

// Rewriting the same chunks again and again leaves a log of the live ones.
func TestLogIsCompacted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, Options{Dir: dir, Collection: "kb", NoSync: true})
	big := strings.Repeat("long text ", 200)
	for range 100 {
		c := batch("d1", 0, 10)
		for i := range c {
			c[i].Text = big
		}
		if err := s.Upsert(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteDocument(ctx, "none"); err != nil {
		t.Fatal(err)
	}
	if err := s.Upsert(ctx, batch("d2", 0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDocument(ctx, "d2"); err != nil { // a delete may compact
		t.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(dir, "kb", logName))
	if fi.Size() > 3*10*int64(len(big)) {
		t.Errorf("log of 10 live chunks is %d bytes", fi.Size())
	}
	s.Close()
	s2 := openT(t, Options{Dir: dir, Collection: "kb"})
	if info, _ := s2.Info(ctx); info.Count != 10 {
		t.Errorf("count after compaction = %d", info.Count)
	}
}

// A collection of the old chromem-go layout is imported once; a file a
// crash left truncated is skipped and logged, never fatal.
func TestLegacyLayoutIsImported(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	col := filepath.Join(dir, "kb", "vectors", "abcd")
	if err := os.MkdirAll(col, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kb", "meta.json"), []byte(`{"name":"kb","dimension":3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(name string, d legacyDoc, truncate bool) {
		var b bytes.Buffer
		if err := gob.NewEncoder(&b).Encode(d); err != nil {
			t.Fatal(err)
		}
		data := b.Bytes()
		if truncate {
			data = data[:len(data)/2]
		}
		if err := os.WriteFile(filepath.Join(col, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.gob", legacyDoc{ID: "a", Content: "华为Mate60的价格是5999元", Embedding: []float32{1, 0, 0},
		Metadata: map[string]string{legacyKeyDoc: "d1", legacyKeyZero: "0", "source": "kb.md"}}, false)
	write("b.gob", legacyDoc{ID: "b", Content: "retry with backoff", Embedding: []float32{0, 1, 0},
		Metadata: map[string]string{legacyKeyDoc: "d1", legacyKeyZero: "0"}}, false)
	write("c.gob", legacyDoc{ID: "c", Content: "torn", Embedding: []float32{0, 0, 1},
		Metadata: map[string]string{legacyKeyDoc: "d2", legacyKeyZero: "0"}}, true)

	var logged bytes.Buffer
	s, err := Open(Options{Dir: dir, Collection: "kb", Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatalf("Open of the old layout: %v", err)
	}
	defer s.Close()
	if info, _ := s.Info(ctx); info.Count != 2 || info.Dimension != 3 {
		t.Errorf("imported %+v, want 2 chunks of dimension 3", info)
	}
	if !strings.Contains(logged.String(), "skipping a damaged chunk file") {
		t.Errorf("the torn file was not logged: %s", logged.String())
	}
	hits, err := s.Search(ctx, activities.SearchRequest{Text: "华为Mate60价格", Mode: activities.SearchKeyword})
	if err != nil || len(hits) != 1 || hits[0].Chunk.ID != "a" || hits[0].Chunk.DocumentID != "d1" || hits[0].Chunk.Metadata["source"] != "kb.md" {
		t.Errorf("search of the imported chunks: %+v, %v", hits, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "kb", "vectors")); !os.IsNotExist(err) {
		t.Errorf("the old layout is still in place: %v", err)
	}
}
