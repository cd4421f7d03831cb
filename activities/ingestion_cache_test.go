package activities

import (
	"fmt"
	"strings"
	"testing"
)

func TestPieceCacheIsBounded(t *testing.T) {
	var c pieceCache
	key := func(i int) pieceKey { return pieceKey{documentID: fmt.Sprint("d", i), hash: "h"} }
	piece := []Piece{{ID: "p", Text: "text"}}
	for i := range pieceCacheEntries + 3 {
		c.put(key(i), piece)
	}
	if len(c.entries) != pieceCacheEntries {
		t.Fatalf("%d entries, want %d", len(c.entries), pieceCacheEntries)
	}
	if _, ok := c.get(key(0)); ok {
		t.Error("the oldest entry was kept")
	}
	// A hit makes an entry the most recent: it survives the next put.
	if _, ok := c.get(key(3)); !ok {
		t.Fatal("entry 3 missing")
	}
	c.put(key(100), piece)
	if _, ok := c.get(key(3)); !ok {
		t.Error("a recently used entry was evicted")
	}
	if _, ok := c.get(key(4)); ok {
		t.Error("the least recently used entry was kept")
	}
	// Bytes are bounded too; a document over the bound is not cached.
	big := []Piece{{Text: strings.Repeat("x", pieceCacheBytes/2)}}
	c.put(key(200), big)
	c.put(key(201), big)
	if _, ok := c.get(key(200)); ok {
		t.Error("the byte bound was not applied")
	}
	c.put(key(202), []Piece{{Text: strings.Repeat("x", pieceCacheBytes)}})
	if _, ok := c.get(key(202)); ok {
		t.Error("a document over the whole bound was cached")
	}
}
