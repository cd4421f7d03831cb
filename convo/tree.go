package convo

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// Tree is a conversation session: messages linked by ParentID. The active
// leaf selects a branch (root → leaf); forking is appending a second child to
// any message.
//
// Each node stores, computed once at Append: its depth, the token sum and
// path hash of its branch from the root, the number of unanswered tool calls,
// its nearest user and summary ancestors, and one skew-binary jump pointer.
// With these, [Tree.Window], [Tree.LastSummary] and [Tree.PathHash]
// cost O(window) or O(log depth), never O(history).
//
// Append stores a copy of the message (Meta and ToolCall included). Messages
// returned by the read methods share Meta and ToolCall with the tree: treat
// them as read-only. A Tree is not safe for concurrent mutation; concurrent
// reads are fine. The zero value is an empty tree.
type Tree struct {
	nodes []node
	index map[string]int32
	tok   Tokenizer
	roots []int32
}

type node struct {
	msg     Message
	parent  int32 // -1 for a root
	jump    int32 // skew-binary ancestor pointer (Myers 1983); self for a root
	depth   int32 // 0 for a root
	open    int32 // unanswered tool calls after this message
	user    int32 // nearest user message at or above, -1 if none
	summary int32 // nearest summary record at or above, -1 if none
	cum     int   // Tokens summed from the root to this message
	hash    pathHash
	kids    []int32
}

// NewTree returns an empty tree. Messages must be appended with Tokens
// already set (see [MessageTokens]).
func NewTree() *Tree {
	return &Tree{index: make(map[string]int32)}
}

// NewTreeWithTokenizer returns an empty tree whose Append sets
// Tokens = MessageTokens(tok, m) on messages that arrive with Tokens == 0.
func NewTreeWithTokenizer(tok Tokenizer) *Tree {
	t := NewTree()
	t.tok = tok
	return t
}

// Len is the number of messages in the tree.
func (t *Tree) Len() int { return len(t.nodes) }

// Append adds m as a child of m.ParentID (or as a root when ParentID is
// empty). It fails, leaving the tree unchanged, when m breaks a field rule
// ([Message.Validate]), its id is taken ([ErrDuplicateID]), its parent is
// unknown ([ErrMissingParent]), or tool pairing would break on the branch:
// a result must answer an unanswered call of the branch ([ErrOrphanResult]),
// and only tool calls and results may follow an unanswered call
// ([ErrUnansweredCall]).
func (t *Tree) Append(m Message) error {
	if t.index == nil {
		t.index = make(map[string]int32)
	}
	if t.tok != nil && m.Tokens == 0 {
		m.Tokens = MessageTokens(t.tok, m)
	}
	m.Meta = maps.Clone(m.Meta)
	if m.ToolCall != nil {
		tc := *m.ToolCall
		tc.Args = slices.Clone(tc.Args)
		m.ToolCall = &tc
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("append: %w", err)
	}
	if _, dup := t.index[m.ID]; dup {
		return fmt.Errorf("append %q: %w", m.ID, ErrDuplicateID)
	}
	if len(t.nodes) >= math.MaxInt32 {
		return fmt.Errorf("append %q: tree is full", m.ID)
	}
	x := int32(len(t.nodes))
	nd := node{msg: m, parent: -1, jump: x, user: -1, summary: -1}
	if m.ParentID != "" {
		p, ok := t.index[m.ParentID]
		if !ok {
			return fmt.Errorf("append %q: parent %q: %w", m.ID, m.ParentID, ErrMissingParent)
		}
		if err := t.checkPairing(p, &m); err != nil {
			return fmt.Errorf("append: %w", err)
		}
		pn := &t.nodes[p]
		nd.parent, nd.depth, nd.open = p, pn.depth+1, pn.open
		nd.user, nd.summary, nd.cum, nd.hash = pn.user, pn.summary, pn.cum, pn.hash
		nd.jump = p
		if j := pn.jump; j != p {
			if jj := t.nodes[j].jump; pn.depth-t.nodes[j].depth == t.nodes[j].depth-t.nodes[jj].depth {
				nd.jump = jj
			}
		}
	} else if err := t.checkPairing(-1, &m); err != nil {
		return fmt.Errorf("append: %w", err)
	}
	switch m.Role {
	case RoleToolCall:
		nd.open++
	case RoleToolResult:
		nd.open--
	case RoleUser:
		nd.user = x
	case RoleSummary:
		nd.summary = x
	}
	nd.cum += m.Tokens
	nd.hash = nd.hash.next(&m)
	t.nodes = append(t.nodes, nd)
	t.index[m.ID] = x
	if nd.parent >= 0 {
		t.nodes[nd.parent].kids = append(t.nodes[nd.parent].kids, x)
	} else {
		t.roots = append(t.roots, x)
	}
	return nil
}

// checkPairing applies the tool pairing rules to m appended under parent p
// (-1 for a root). Unanswered calls sit in the run of tool messages just above
// p, so it reads only that run.
func (t *Tree) checkPairing(p int32, m *Message) error {
	open := int32(0)
	if p >= 0 {
		open = t.nodes[p].open
	}
	switch m.Role {
	case RoleToolCall:
		if open > 0 && t.openCall(p, m.ToolCall.ID) >= 0 {
			return fmt.Errorf("message %q: call id %q is already open on the branch: %w", m.ID, m.ToolCall.ID, ErrInvalidMessage)
		}
	case RoleToolResult:
		if open == 0 || t.openCall(p, m.ToolCallID) < 0 {
			return fmt.Errorf("message %q answers call %q: %w", m.ID, m.ToolCallID, ErrOrphanResult)
		}
	default:
		if open > 0 {
			return fmt.Errorf("%s message %q follows an unanswered tool call: %w", m.Role, m.ID, ErrUnansweredCall)
		}
	}
	return nil
}

// openCall finds the unanswered call with id callID on the branch ending at
// p, or returns -1.
func (t *Tree) openCall(p int32, callID string) int32 {
	answered := 0
	for x := p; x >= 0; x = t.nodes[x].parent {
		nd := &t.nodes[x]
		switch nd.msg.Role {
		case RoleToolResult:
			if nd.msg.ToolCallID == callID {
				answered++
			}
		case RoleToolCall:
			if nd.msg.ToolCall.ID == callID {
				if answered == 0 {
					return x
				}
				answered--
			}
		}
		if nd.parent < 0 || t.nodes[nd.parent].open == 0 {
			break // x starts the run of unanswered calls
		}
	}
	return -1
}

// Get returns the message with the given id.
func (t *Tree) Get(id string) (Message, bool) {
	x, ok := t.index[id]
	if !ok {
		return Message{}, false
	}
	return t.nodes[x].msg, true
}

// Children returns the children of id in the order they were appended (nil
// for an unknown id or a leaf).
func (t *Tree) Children(id string) []Message {
	x, ok := t.index[id]
	if !ok {
		return nil
	}
	return t.messagesOf(t.nodes[x].kids)
}

// Roots returns the messages without a parent, in append order.
func (t *Tree) Roots() []Message { return t.messagesOf(t.roots) }

// Messages returns every message in append order (parents before children),
// ready for [EncodeJSONL].
func (t *Tree) Messages() []Message {
	out := make([]Message, len(t.nodes))
	for i := range t.nodes {
		out[i] = t.nodes[i].msg
	}
	return out
}

// Grown returns what grew below id since it was a leaf: the newest child
// of id, then its newest child, and so on to a leaf (id "" starts from the
// newest root). Nil for a leaf or an unknown id.
func (t *Tree) Grown(id string) []Message {
	kids := t.roots
	if id != "" {
		x, ok := t.index[id]
		if !ok {
			return nil
		}
		kids = t.nodes[x].kids
	}
	var out []Message
	for len(kids) > 0 {
		x := kids[len(kids)-1]
		out = append(out, t.nodes[x].msg)
		kids = t.nodes[x].kids
	}
	return out
}

// AppendLeaf is [Tree.Append] for a message that must hang below a leaf:
// it fails with [ErrNotLeaf], leaving the tree unchanged, when m's parent
// (or, for a root, the tree) already has a child.
func (t *Tree) AppendLeaf(m Message) error {
	kids := t.roots
	if m.ParentID != "" {
		kids = nil // an unknown parent: Append says so
		if x, ok := t.index[m.ParentID]; ok {
			kids = t.nodes[x].kids
		}
	}
	if _, dup := t.index[m.ID]; !dup && len(kids) > 0 {
		return fmt.Errorf("append %q below %q: %w", m.ID, m.ParentID, ErrNotLeaf)
	}
	return t.Append(m)
}

func (t *Tree) messagesOf(xs []int32) []Message {
	if len(xs) == 0 {
		return nil
	}
	out := make([]Message, len(xs))
	for i, x := range xs {
		out[i] = t.nodes[x].msg
	}
	return out
}

func (t *Tree) lookup(id string) (int32, error) {
	x, ok := t.index[id]
	if !ok {
		return -1, fmt.Errorf("message %q: %w", id, ErrNotFound)
	}
	return x, nil
}

// Branch returns the messages from the root to leafID, root first: the full
// transcript of that branch. It costs O(depth).
func (t *Tree) Branch(leafID string) ([]Message, error) {
	x, err := t.lookup(leafID)
	if err != nil {
		return nil, fmt.Errorf("branch: %w", err)
	}
	return t.tail(x, int(t.nodes[x].depth)+1), nil
}

func (t *Tree) tail(x int32, n int) []Message {
	n = min(n, int(t.nodes[x].depth)+1)
	out := make([]Message, n)
	for i := n - 1; i >= 0; i-- {
		out[i] = t.nodes[x].msg
		x = t.nodes[x].parent
	}
	return out
}

// ancestor returns the ancestor of x at depth d (d <= depth of x) in
// O(log depth), following jump pointers.
func (t *Tree) ancestor(x int32, d int32) int32 {
	for t.nodes[x].depth > d {
		if j := t.nodes[x].jump; t.nodes[j].depth >= d {
			x = j
		} else {
			x = t.nodes[x].parent
		}
	}
	return x
}

// PathHash returns the hash of the branch from the root to id (ids, roles,
// contents and tool fields of every message on it), in O(1). It equals
// [BranchHash] of that branch.
func (t *Tree) PathHash(id string) (string, error) {
	x, err := t.lookup(id)
	if err != nil {
		return "", fmt.Errorf("path hash: %w", err)
	}
	return t.nodes[x].hash.String(), nil
}

// LastSummary returns the newest RoleSummary record on the branch ending at
// leafID, in O(1).
func (t *Tree) LastSummary(leafID string) (Message, bool) {
	x, ok := t.index[leafID]
	if !ok || t.nodes[x].summary < 0 {
		return Message{}, false
	}
	return t.nodes[t.nodes[x].summary].msg, true
}

// Window cuts the model's window from the branch ending at leafID. The
// result equals Trim(Branch(leafID), cfg), but it reads only the window (plus
// at most one round before it): counts and token totals come from the
// per-node prefix sums.
func (t *Tree) Window(leafID string, cfg WindowConfig) (Trimmed, error) {
	if err := cfg.Validate(); err != nil {
		return Trimmed{}, err
	}
	src, err := t.source(leafID)
	if err != nil {
		return Trimmed{}, fmt.Errorf("window: %w", err)
	}
	return trim(src, cfg, 0, 0)
}

func (t *Tree) source(leafID string) (*treeSource, error) {
	x, err := t.lookup(leafID)
	if err != nil {
		return nil, err
	}
	return &treeSource{t: t, leaf: x, n: int(t.nodes[x].depth) + 1}, nil
}

// treeSource reads a branch of a tree for the window algorithm, caching the
// nodes it has walked back from the leaf.
type treeSource struct {
	t    *Tree
	leaf int32
	n    int
	back []int32 // back[k] is the node at position n-1-k
}

func (s *treeSource) idx(i int) int32 {
	k := s.n - 1 - i
	if k < len(s.back) {
		return s.back[k]
	}
	if k == len(s.back) {
		x := s.leaf
		if k > 0 {
			x = s.t.nodes[s.back[k-1]].parent
		}
		s.back = append(s.back, x)
		return x
	}
	from := s.leaf
	if len(s.back) > 0 {
		from = s.back[len(s.back)-1]
	}
	return s.t.ancestor(from, int32(i))
}

func (s *treeSource) length() int         { return s.n }
func (s *treeSource) at(i int) *Message   { return &s.t.nodes[s.idx(i)].msg }
func (s *treeSource) openAfter(i int) int { return int(s.t.nodes[s.idx(i)].open) }
func (s *treeSource) totalTokens() int    { return s.t.nodes[s.leaf].cum }
func (s *treeSource) hashAt(i int) string { return s.t.nodes[s.idx(i)].hash.String() }
func (s *treeSource) tokensBefore(i int) int {
	if i == 0 {
		return 0
	}
	return s.t.nodes[s.idx(i-1)].cum
}
func (s *treeSource) newestUser() int {
	u := s.t.nodes[s.leaf].user
	if u < 0 {
		return -1
	}
	return int(s.t.nodes[u].depth)
}

func (s *treeSource) appendRange(dst []Message, a, b int) []Message {
	if b <= a {
		return dst
	}
	from := len(dst)
	dst = slices.Grow(dst, b-a)[:from+b-a]
	x := s.idx(b - 1)
	for i := len(dst) - 1; i >= from; i-- {
		dst[i] = s.t.nodes[x].msg
		x = s.t.nodes[x].parent
	}
	return dst
}
