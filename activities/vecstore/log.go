package vecstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
)

// The chunk log is the store's source of truth: an append-only file of
// records, each framed as
//
//	length uint32 | crc32c(payload) uint32 | payload
//
// A write appends a whole batch in one write call and fsyncs it. A process
// killed mid-write leaves a torn last record: reading stops at the first
// record whose frame or checksum is wrong, the damage is logged, the file
// is cut back to the last good record, and the batch it belonged to is
// written again when its ingestion activity is retried. Nothing at Open is
// fatal because of a damaged record.
//
// When more than half the log is dead (replaced or deleted chunks), it is
// compacted: the live chunks are written to a new file, fsynced and
// renamed over the old one.

const (
	logName     = "chunks.log"
	frameHeader = 8
	// maxRecord bounds one record's payload: a frame claiming more is
	// damage, not a record.
	maxRecord = 64 << 20

	opUpsert byte = 1
	opDelete byte = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entry is a stored chunk: its vector is unit length (or zero).
type entry struct {
	id, doc, text string
	meta          map[string]string
	vec           []float32
	zero          bool
	row           int // its index in Store.rows when it has a vector
}

// encodeUpsert appends an upsert record's payload for e to b.
func encodeUpsert(b []byte, e *entry) []byte {
	b = append(b, opUpsert)
	b = appendString(b, e.id)
	b = appendString(b, e.doc)
	b = appendString(b, e.text)
	keys := make([]string, 0, len(e.meta))
	for k := range e.meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
		b = appendString(b, e.meta[k])
	}
	if e.zero {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(e.vec)))
	for _, x := range e.vec {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func encodeDelete(b []byte, ids []string) []byte {
	b = append(b, opDelete)
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = appendString(b, id)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// frame appends payload to b as one framed record.
func frame(b, payload []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(payload, castagnoli))
	return append(b, payload...)
}

// decoder reads the fields of one payload.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errors.New("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = errors.New("string past the end")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.err = errors.New("byte past the end")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// record is one decoded payload: an upsert (e set) or a delete (ids set).
type record struct {
	e   *entry
	ids []string
}

func decodeRecord(payload []byte) (record, error) {
	d := decoder{b: payload}
	switch op := d.byte(); op {
	case opUpsert:
		e := &entry{id: d.string(), doc: d.string(), text: d.string()}
		if n := d.uvarint(); n > 0 && d.err == nil {
			if n > uint64(len(d.b)) {
				return record{}, errors.New("metadata past the end")
			}
			e.meta = make(map[string]string, n)
			for range n {
				k := d.string()
				e.meta[k] = d.string()
			}
		}
		e.zero = d.byte() == 1
		n := d.uvarint()
		if d.err == nil && n*4 != uint64(len(d.b)) {
			return record{}, fmt.Errorf("vector of %d dimensions in %d bytes", n, len(d.b))
		}
		e.vec = make([]float32, n)
		for i := range e.vec {
			e.vec[i] = math.Float32frombits(binary.LittleEndian.Uint32(d.b[4*i:]))
		}
		return record{e: e}, d.err
	case opDelete:
		n := d.uvarint()
		if n > uint64(len(d.b)) {
			return record{}, errors.New("ids past the end")
		}
		ids := make([]string, n)
		for i := range ids {
			ids[i] = d.string()
		}
		if d.err == nil && len(d.b) != 0 {
			d.err = errors.New("trailing bytes")
		}
		return record{ids: ids}, d.err
	default:
		return record{}, fmt.Errorf("unknown record type %d", op)
	}
}

// replay reads the log at path, calling apply for each good record, and
// returns the offset just past the last good record and a description of
// any damage after it ("" for none).
func replay(path string, apply func(record)) (good int64, damage string, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, "", err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var head [frameHeader]byte
	var payload []byte
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return good, "", nil
			}
			return good, fmt.Sprintf("a torn record header at byte %d", good), nil
		}
		n := binary.LittleEndian.Uint32(head[:4])
		if n == 0 || n > maxRecord || int64(n) > fi.Size()-good-frameHeader {
			return good, fmt.Sprintf("a record at byte %d claims %d bytes", good, n), nil
		}
		if cap(payload) < int(n) {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		if _, err := io.ReadFull(r, payload); err != nil {
			return good, fmt.Sprintf("a torn record at byte %d", good), nil
		}
		if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(head[4:]) {
			return good, fmt.Sprintf("a record at byte %d fails its checksum", good), nil
		}
		rec, err := decodeRecord(payload)
		if err != nil {
			return good, fmt.Sprintf("a record at byte %d does not decode: %v", good, err), nil
		}
		apply(rec)
		good += frameHeader + int64(n)
	}
}

// logFile is the open chunk log.
type logFile struct {
	f    *os.File
	size int64 // bytes of good records
	sync bool
}

// openLog opens (creating) the log for appending at good, cutting off any
// damaged tail.
func openLog(path string, good int64, sync bool) (*logFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return &logFile{f: f, size: good, sync: sync}, nil
}

// append writes framed records in one write and syncs them. On failure the
// file is cut back, so that a later append does not follow a torn record.
func (l *logFile) append(b []byte) error {
	if _, err := l.f.Write(b); err != nil {
		_ = l.f.Truncate(l.size)
		_, _ = l.f.Seek(l.size, io.SeekStart)
		return err
	}
	if l.sync {
		if err := l.f.Sync(); err != nil {
			return err
		}
	}
	l.size += int64(len(b))
	return nil
}

func (l *logFile) close() error { return l.f.Close() }

// writeLog writes the records in b as a new log at path atomically: a
// temporary file, fsynced, renamed over path, and the directory fsynced.
func writeLog(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), logName+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
