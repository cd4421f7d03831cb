package convo

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
)

// pathHash chains message digests from the root: h(m1..mk) =
// sha256(h(m1..mk-1) || digest(mk)), starting from 32 zero bytes.
type pathHash [sha256.Size]byte

func (h pathHash) next(m *Message) pathHash {
	d := sha256.New()
	d.Write(h[:])
	writeField(d, m.ID)
	writeField(d, string(m.Role))
	writeField(d, m.Content)
	if m.ToolCall != nil {
		writeField(d, m.ToolCall.ID)
		writeField(d, m.ToolCall.Name)
		writeField(d, string(m.ToolCall.Args))
	} else {
		writeField(d, "")
		writeField(d, "")
		writeField(d, "")
	}
	writeField(d, m.ToolCallID)
	var out pathHash
	d.Sum(out[:0])
	return out
}

// writeField writes a length-prefixed string so that field boundaries are
// unambiguous.
func writeField(d hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	d.Write(n[:])
	d.Write([]byte(s))
}

// String is the lowercase hex form.
func (h pathHash) String() string { return hex.EncodeToString(h[:]) }

// BranchHash returns the path hash of a branch given root first: a chained
// SHA-256 of the ids, roles, contents and tool fields of its messages
// (not of Tokens, CreatedAt or Meta). It equals [Tree.PathHash] of the last
// message, and is "" for an empty branch.
func BranchHash(msgs []Message) string {
	if len(msgs) == 0 {
		return ""
	}
	var h pathHash
	for i := range msgs {
		h = h.next(&msgs[i])
	}
	return h.String()
}
