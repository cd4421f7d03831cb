package convo

// What only the tests call, kept here as their builders and oracles: the
// service never forks, lists leaves, takes a tail or builds a tree from
// loose messages this way.

import (
	"fmt"
	"slices"
)

// fork appends m as a new child of the existing message fromID, starting a
// new branch there. It is Append with m.ParentID = fromID.
func (t *Tree) fork(fromID string, m Message) error {
	if _, ok := t.index[fromID]; !ok {
		return fmt.Errorf("fork from %q: %w", fromID, ErrNotFound)
	}
	m.ParentID = fromID
	return t.Append(m)
}

// leaves returns the ids of messages without children, in append order.
func (t *Tree) leaves() []string {
	var ids []string
	for i := range t.nodes {
		if len(t.nodes[i].kids) == 0 {
			ids = append(ids, t.nodes[i].msg.ID)
		}
	}
	return ids
}

// tailOf returns the last n messages of the branch ending at leafID, oldest
// first, in O(n). It returns nil for an unknown leaf, the whole branch when
// it is shorter than n.
func (t *Tree) tailOf(leafID string, n int) []Message {
	x, ok := t.index[leafID]
	if !ok || n <= 0 {
		return nil
	}
	return t.tail(x, n)
}

// branchStats describes a branch without walking it.
type branchStats struct {
	// Messages is the branch length, root and leaf included.
	Messages int `json:"messages"`
	// Tokens is [PromptTokens] of the whole branch.
	Tokens int `json:"tokens"`
	// OpenCalls is the number of tool calls at the end still unanswered.
	OpenCalls int `json:"openCalls"`
}

// stats returns the size of the branch ending at leafID in O(1).
func (t *Tree) stats(leafID string) (branchStats, error) {
	x, err := t.lookup(leafID)
	if err != nil {
		return branchStats{}, fmt.Errorf("stats: %w", err)
	}
	nd := &t.nodes[x]
	n := int(nd.depth) + 1
	return branchStats{Messages: n, Tokens: promptOf(nd.cum, n), OpenCalls: int(nd.open)}, nil
}

// buildTree builds a tree from messages in any order (parents may come after
// their children, as in a merged file); siblings keep their relative order.
func buildTree(msgs []Message) (*Tree, error) {
	t := NewTree()
	byParent := make(map[string][]int, len(msgs))
	ids := make(map[string]bool, len(msgs))
	for i := range msgs {
		if ids[msgs[i].ID] {
			return nil, fmt.Errorf("build tree: message %d %q: %w", i, msgs[i].ID, ErrDuplicateID)
		}
		ids[msgs[i].ID] = true
		byParent[msgs[i].ParentID] = append(byParent[msgs[i].ParentID], i)
	}
	queue := slices.Clone(byParent[""])
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		if err := t.Append(msgs[i]); err != nil {
			return nil, fmt.Errorf("build tree: message %d: %w", i, err)
		}
		queue = append(queue, byParent[msgs[i].ID]...)
	}
	if t.Len() < len(msgs) {
		// Left over: messages under a missing parent, or in a cycle.
		for i := range msgs {
			if _, ok := t.index[msgs[i].ID]; !ok && !ids[msgs[i].ParentID] {
				return nil, fmt.Errorf("build tree: message %d %q: parent %q: %w", i, msgs[i].ID, msgs[i].ParentID, ErrMissingParent)
			}
		}
		for i := range msgs {
			if _, ok := t.index[msgs[i].ID]; !ok {
				return nil, fmt.Errorf("build tree: message %d %q: %w", i, msgs[i].ID, ErrCycle)
			}
		}
	}
	return t, nil
}

// fallbackTruncate returns exactly the last n messages of msgs (all of them
// when there are fewer, none for n <= 0): seed 002's fallback when the
// summariser fails. The result shares msgs' backing array.
func fallbackTruncate(msgs []Message, n int) []Message {
	if n <= 0 {
		return msgs[:0:0]
	}
	if n >= len(msgs) {
		return msgs
	}
	return msgs[len(msgs)-n:]
}
