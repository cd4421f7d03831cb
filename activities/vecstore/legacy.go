package vecstore

import (
	"encoding/gob"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// legacyDoc is a chunk as chromem-go (the store's engine before the chunk
// log) wrote it: one gob file per chunk under vectors/.
type legacyDoc struct {
	ID        string
	Metadata  map[string]string
	Embedding []float32
	Content   string
}

// Reserved metadata keys of the chromem-go layout.
const (
	legacyKeyDoc  = "\x00doc"
	legacyKeyZero = "\x00zero"
)

// importLegacy moves a collection written by chromem-go into a new chunk
// log (once: only when there is no log yet), then renames vectors/ aside.
// Files that do not decode (a write torn by a crash) are skipped and
// logged: their batches were never acknowledged, or can be ingested again.
func (s *Store) importLegacy(logPath string) error {
	old := filepath.Join(s.dir, "vectors")
	if _, err := os.Stat(old); err != nil {
		return nil
	}
	if _, err := os.Stat(logPath); err == nil {
		return nil
	}
	var b, payload []byte
	imported, skipped := 0, 0
	err := filepath.WalkDir(old, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".gob") || d.Name() == "00000000.gob" {
			return err
		}
		var doc legacyDoc
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		derr := gob.NewDecoder(f).Decode(&doc)
		f.Close()
		if derr != nil || doc.ID == "" {
			skipped++
			s.logger.Warn("vecstore: skipping a damaged chunk file of the old layout", "file", path, "error", derr)
			return nil
		}
		e := &entry{id: doc.ID, doc: doc.Metadata[legacyKeyDoc], text: doc.Content, zero: doc.Metadata[legacyKeyZero] == "1"}
		for k, v := range doc.Metadata {
			if !strings.HasPrefix(k, "\x00") {
				if e.meta == nil {
					e.meta = map[string]string{}
				}
				e.meta[k] = v
			}
		}
		if !e.zero {
			e.vec = doc.Embedding
		}
		payload = encodeUpsert(payload[:0], e)
		b = frame(b, payload)
		imported++
		return nil
	})
	if err != nil {
		return fmt.Errorf("vecstore: import %s: %w", old, err)
	}
	if err := writeLog(logPath, b); err != nil {
		return fmt.Errorf("vecstore: import %s: %w", old, err)
	}
	aside := fmt.Sprintf("%s.imported-%d", old, time.Now().Unix())
	if err := os.Rename(old, aside); err != nil {
		return fmt.Errorf("vecstore: import %s: %w", old, err)
	}
	s.logger.Info("vecstore: imported the collection's old layout into the chunk log",
		"collection", s.name, "chunks", imported, "skipped", skipped, "old files", aside)
	return nil
}
