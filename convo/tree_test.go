package convo

import (
	"errors"
	"slices"
	"strconv"
	"testing"
)

func TestTreeAppendErrors(t *testing.T) {
	tr := treeOf(t, spec(t, "s10 u10 c10"))
	tests := []struct {
		name string
		m    Message
		want error
	}{
		{"duplicate id", Message{ID: "u1", ParentID: "s0", Role: RoleUser}, ErrDuplicateID},
		{"missing parent", Message{ID: "n", ParentID: "ghost", Role: RoleUser}, ErrMissingParent},
		{"empty id", Message{Role: RoleUser}, ErrInvalidMessage},
		{"unknown role", Message{ID: "n", Role: "bot"}, ErrInvalidMessage},
		{"negative tokens", Message{ID: "n", Role: RoleUser, Tokens: -1}, ErrInvalidMessage},
		{"tool call without name", Message{ID: "n", Role: RoleToolCall, ToolCall: &ToolCall{ID: "k"}}, ErrInvalidMessage},
		{"tool call with bad args", Message{ID: "n", Role: RoleToolCall, ToolCall: &ToolCall{ID: "k", Name: "f", Args: []byte("{")}}, ErrInvalidMessage},
		{"tool result without call id", Message{ID: "n", ParentID: "c2", Role: RoleToolResult}, ErrInvalidMessage},
		{"orphan result", Message{ID: "n", ParentID: "u1", Role: RoleToolResult, ToolCallID: "call-c2"}, ErrOrphanResult},
		{"result for unknown call", Message{ID: "n", ParentID: "c2", Role: RoleToolResult, ToolCallID: "other"}, ErrOrphanResult},
		{"user after open call", Message{ID: "n", ParentID: "c2", Role: RoleUser}, ErrUnansweredCall},
		{"duplicate open call id", Message{ID: "n", ParentID: "c2", Role: RoleToolCall, ToolCall: &ToolCall{ID: "call-c2", Name: "f"}}, ErrInvalidMessage},
	}
	for _, tt := range tests {
		if err := tr.Append(tt.m); !errors.Is(err, tt.want) {
			t.Errorf("%s: Append = %v, want %v", tt.name, err, tt.want)
		}
	}
	if tr.Len() != 3 {
		t.Errorf("failed appends changed the tree: Len = %d", tr.Len())
	}
	// The result is accepted once, then the call is closed.
	res := Message{ID: "r3", ParentID: "c2", Role: RoleToolResult, ToolCallID: "call-c2"}
	if err := tr.Append(res); err != nil {
		t.Fatalf("append result: %v", err)
	}
	again := Message{ID: "r4", ParentID: "r3", Role: RoleToolResult, ToolCallID: "call-c2"}
	if err := tr.Append(again); !errors.Is(err, ErrOrphanResult) {
		t.Errorf("second result for one call: %v, want ErrOrphanResult", err)
	}
}

func TestTreeBranchesAndForks(t *testing.T) {
	// s0 ─ u1 ─ a2 ─ u3 ─ a4
	//             └─ u5 ─ a6   (fork at a2)
	tr := treeOf(t, spec(t, "s10 u10 a10 u10 a10"))
	if err := tr.fork("a2", Message{ID: "u5", Role: RoleUser, Tokens: 7}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Append(Message{ID: "a6", ParentID: "u5", Role: RoleAssistant, Tokens: 5}); err != nil {
		t.Fatal(err)
	}
	if err := tr.fork("nope", Message{ID: "z", Role: RoleUser}); !errors.Is(err, ErrNotFound) {
		t.Errorf("fork from unknown: %v", err)
	}
	b, err := tr.Branch("a6")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"s0", "u1", "a2", "u5", "a6"}; !slices.Equal(ids(b), want) {
		t.Errorf("Branch(a6) = %v, want %v", ids(b), want)
	}
	if got := ids(tr.Children("a2")); !slices.Equal(got, []string{"u3", "u5"}) {
		t.Errorf("Children(a2) = %v", got)
	}
	if tr.Children("a6") != nil || tr.Children("ghost") != nil {
		t.Error("leaf or unknown id has children")
	}
	if got := tr.leaves(); !slices.Equal(got, []string{"a4", "a6"}) {
		t.Errorf("Leaves = %v", got)
	}
	if got := ids(tr.Roots()); !slices.Equal(got, []string{"s0"}) {
		t.Errorf("Roots = %v", got)
	}
	if got := ids(tr.tailOf("a6", 2)); !slices.Equal(got, []string{"u5", "a6"}) {
		t.Errorf("Tail(a6, 2) = %v", got)
	}
	if got := ids(tr.tailOf("a6", 99)); !slices.Equal(got, ids(b)) {
		t.Errorf("Tail(a6, 99) = %v", got)
	}
	if tr.tailOf("ghost", 3) != nil || tr.tailOf("a6", 0) != nil {
		t.Error("Tail of unknown leaf or n=0 not nil")
	}
	st, err := tr.stats("a6")
	if err != nil {
		t.Fatal(err)
	}
	if want := (branchStats{Messages: 5, Tokens: 10 + 10 + 10 + 7 + 5 + ReplyPrimingTokens}); st != want {
		t.Errorf("Stats = %+v, want %+v", st, want)
	}
	if _, err := tr.Branch("ghost"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Branch(ghost) = %v", err)
	}
	h, err := tr.PathHash("a6")
	if err != nil || h != BranchHash(b) {
		t.Errorf("PathHash = %q, %v; want BranchHash %q", h, err, BranchHash(b))
	}
	if m, ok := tr.Get("u5"); !ok || m.Tokens != 7 || m.ParentID != "a2" {
		t.Errorf("Get(u5) = %+v, %v", m, ok)
	}
	if got := ids(tr.Messages()); !slices.Equal(got, []string{"s0", "u1", "a2", "u3", "a4", "u5", "a6"}) {
		t.Errorf("Messages = %v", got)
	}
}

func TestTreeWithTokenizerCountsOnAppend(t *testing.T) {
	tr := NewTreeWithTokenizer(wordTok{})
	if err := tr.Append(Message{ID: "1", Role: RoleUser, Content: "three little words"}); err != nil {
		t.Fatal(err)
	}
	m, _ := tr.Get("1")
	if want := MessageOverheadTokens + 1 + 3; m.Tokens != want {
		t.Errorf("Tokens = %d, want %d", m.Tokens, want)
	}
}

func TestTreeLastSummary(t *testing.T) {
	tr := treeOf(t, spec(t, "u10 a10 x0 u10 a10"))
	s, ok := tr.LastSummary("a4")
	if !ok || s.ID != "x2" {
		t.Errorf("LastSummary(a4) = %v, %v", s.ID, ok)
	}
	if _, ok := tr.LastSummary("a1"); ok {
		t.Error("LastSummary(a1) found a summary above it")
	}
}

func TestBuildTree(t *testing.T) {
	msgs := spec(t, "s10 u10 a10 u10")
	shuffled := []Message{msgs[3], msgs[1], msgs[0], msgs[2]}
	tr, err := buildTree(shuffled)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := tr.Branch("u3")
	if !slices.Equal(ids(b), ids(msgs)) {
		t.Errorf("branch = %v", ids(b))
	}
	cyc := []Message{{ID: "a", ParentID: "b", Role: RoleUser}, {ID: "b", ParentID: "a", Role: RoleUser}}
	if _, err := buildTree(cyc); !errors.Is(err, ErrCycle) {
		t.Errorf("cycle: %v", err)
	}
	missing := []Message{{ID: "a", ParentID: "zz", Role: RoleUser}}
	if _, err := buildTree(missing); !errors.Is(err, ErrMissingParent) {
		t.Errorf("missing parent: %v", err)
	}
	dup := []Message{{ID: "a", Role: RoleUser}, {ID: "a", Role: RoleUser}}
	if _, err := buildTree(dup); !errors.Is(err, ErrDuplicateID) {
		t.Errorf("duplicate: %v", err)
	}
}

func TestAncestorDeepChain(t *testing.T) {
	tr := NewTree()
	const n = 5000
	parent := ""
	for i := range n {
		id := "m" + strconv.Itoa(i)
		role := RoleUser
		if i%2 == 1 {
			role = RoleAssistant
		}
		if err := tr.Append(Message{ID: id, ParentID: parent, Role: role, Tokens: 1}); err != nil {
			t.Fatal(err)
		}
		parent = id
	}
	leaf := tr.index[parent]
	for _, d := range []int32{0, 1, 2, 17, 1023, 1024, 4095, n - 1} {
		x := tr.ancestor(leaf, d)
		if tr.nodes[x].depth != d || tr.nodes[x].msg.ID != "m"+strconv.Itoa(int(d)) {
			t.Errorf("ancestor at depth %d = %s", d, tr.nodes[x].msg.ID)
		}
	}
}

// TestWindowReadsOnlyTheWindow pins the O(window) guarantee without timing:
// on a 100k-message branch, the window algorithm walks back only over the
// window plus at most one round, for every strategy.
func TestWindowReadsOnlyTheWindow(t *testing.T) {
	tr, leaf := benchTree(t, 100_000)
	for _, cfg := range []WindowConfig{
		DefaultWindowConfig(),
		{Strategy: StrategyTokenLimit, MaxTokens: 2000, StartOn: StartOnHuman, IncludeSystem: true},
		{Strategy: StrategySlidingWindow, MaxRounds: 3, IncludeSystem: true},
		{Strategy: StrategyHybrid, MaxRounds: 5, MaxTokens: 4000, TokenStrategy: TokenStrategyFirst, IncludeSystem: true},
	} {
		src, err := tr.source(leaf)
		if err != nil {
			t.Fatal(err)
		}
		got, err := trim(src, cfg, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		const roundLen = 4 // user, tool call, tool result, assistant
		if read := len(src.back); read > len(got.Messages)+roundLen+1 {
			t.Errorf("%+v: walked %d nodes for a window of %d", cfg, read, len(got.Messages))
		}
		if got.TrimmedCount != 100_000-len(got.Messages) || got.TokensBefore <= got.TokensAfter {
			t.Errorf("%+v: counts %d/%d/%d", cfg, got.TrimmedCount, got.TokensBefore, got.TokensAfter)
		}
	}
}

func TestBuildTreeMissingParentBeforeCycle(t *testing.T) {
	msgs := []Message{{ID: "child", ParentID: "x", Role: RoleUser}, {ID: "x", ParentID: "ghost", Role: RoleUser}}
	if _, err := buildTree(msgs); !errors.Is(err, ErrMissingParent) {
		t.Errorf("err = %v, want ErrMissingParent", err)
	}
}

func TestAppendCopiesMessage(t *testing.T) {
	tr := NewTree()
	meta := map[string]string{"k": "v"}
	tc := &ToolCall{ID: "k1", Name: "f"}
	if err := tr.Append(Message{ID: "c", Role: RoleToolCall, ToolCall: tc, Meta: meta}); err != nil {
		t.Fatal(err)
	}
	meta["k"], tc.Name = "changed", "g"
	m, _ := tr.Get("c")
	if m.Meta["k"] != "v" || m.ToolCall.Name != "f" {
		t.Errorf("tree message changed with the caller's copy: %+v", m)
	}
}

// TestAppendLeafAndGrown: a message that must hang below a leaf is refused,
// the tree unchanged, once its parent (or, for a root, the tree) has a
// child; Grown follows the newest child down to a leaf.
func TestAppendLeafAndGrown(t *testing.T) {
	tr := NewTree()
	u := func(id, parent string) Message { return Message{ID: id, ParentID: parent, Role: RoleUser, Content: id} }
	a := func(id, parent string) Message {
		return Message{ID: id, ParentID: parent, Role: RoleAssistant, Content: id}
	}
	if got := tr.Grown(""); got != nil {
		t.Errorf("Grown of an empty tree = %v", ids(got))
	}
	for _, m := range []Message{u("q1", ""), a("a1", "q1"), u("q2", "a1"), a("a2", "q2")} {
		if err := tr.AppendLeaf(m); err != nil {
			t.Fatalf("AppendLeaf(%s) = %v", m.ID, err)
		}
	}
	tests := []struct {
		name string
		m    Message
		want error
	}{
		{"below a leaf", u("q3", "a2"), nil},
		{"below a message with a child", u("x", "a1"), ErrNotLeaf},
		{"a second root", u("r", ""), ErrNotLeaf},
		{"below a new leaf", a("a3", "q3"), nil},
		{"an unknown parent", u("y", "ghost"), ErrMissingParent},
	}
	for _, tt := range tests {
		n := tr.Len()
		err := tr.AppendLeaf(tt.m)
		if !errors.Is(err, tt.want) || (err != nil) != (tt.want != nil) {
			t.Errorf("%s: AppendLeaf = %v, want %v", tt.name, err, tt.want)
		}
		if err != nil && tr.Len() != n {
			t.Errorf("%s: a refused append changed the tree", tt.name)
		}
	}
	// A branch on purpose (Append), then Grown takes the newest child.
	if err := tr.Append(u("e2", "a1")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		from string
		want []string
	}{
		{"", []string{"q1", "a1", "e2"}},
		{"a1", []string{"e2"}},
		{"q2", []string{"a2", "q3", "a3"}},
		{"a3", nil},
		{"ghost", nil},
	} {
		if got := ids(tr.Grown(tt.from)); !slices.Equal(got, tt.want) {
			t.Errorf("Grown(%q) = %v, want %v", tt.from, got, tt.want)
		}
	}
}
