package vecstore

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxflow/ctxflow/activities"
)

// TestEraseTenantAndScrub: EraseTenant removes every chunk of one tenant
// and no other's; until Scrub the deleted text is still in the collection's
// files (the chunk log, the keyword index), after it in none, and the
// store still answers, also after a reopen.
func TestEraseTenantAndScrub(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Collection: "kb"})
	if err != nil {
		t.Fatal(err)
	}
	const gone, kept = "erasedmarkerqx", "keptmarkerzy"
	err = s.Upsert(ctx, []activities.Chunk{
		{ID: "a1", DocumentID: "acme/d", Text: "acme notes " + gone, Vector: []float32{1, 0}, Metadata: map[string]string{activities.MetaTenant: "acme"}},
		{ID: "a2", DocumentID: "acme/e", Text: "more acme " + gone, Vector: []float32{0, 1}, Metadata: map[string]string{activities.MetaTenant: "acme"}},
		{ID: "b1", DocumentID: "d", Text: "beta notes " + kept, Vector: []float32{1, 1}, Metadata: map[string]string{activities.MetaTenant: "beta"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EraseTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Info(ctx); info.Count != 1 {
		t.Errorf("%d chunks after erasing acme, want beta's 1", info.Count)
	}
	holding := func(marker string) []string {
		var out []string
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(marker)) {
					out = append(out, p)
				}
			}
			return nil
		})
		return out
	}
	if len(holding(gone)) == 0 {
		t.Log("the deleted text already left the files before Scrub") // not wrong, but then the test proves less
	}
	if err := s.Scrub(ctx); err != nil {
		t.Fatal(err)
	}
	if f := holding(gone); len(f) > 0 {
		t.Errorf("after Scrub the erased text is still in %v", f)
	}
	if len(holding(kept)) == 0 {
		t.Error("Scrub lost beta's chunk")
	}
	hits, err := s.Search(ctx, activities.SearchRequest{Text: "notes " + kept, Mode: activities.SearchKeyword})
	if err != nil || len(hits) != 1 || hits[0].Chunk.ID != "b1" {
		t.Errorf("keyword search after Scrub: %v %v", hits, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, Options{Dir: dir, Collection: "kb"})
	hits, err = s.Search(ctx, activities.SearchRequest{Text: "notes " + gone + " " + kept, Mode: activities.SearchKeyword})
	if err != nil || len(hits) != 1 || hits[0].Chunk.ID != "b1" {
		t.Errorf("after a reopen: %v %v", hits, err)
	}
}
