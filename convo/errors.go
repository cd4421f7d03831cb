package convo

import "errors"

// Errors returned (wrapped, with context) by this package. Test with
// errors.Is.
var (
	// ErrInvalidMessage: a message breaks a field rule (empty id, unknown
	// role, tool call without name, ...).
	ErrInvalidMessage = errors.New("invalid message")
	// ErrDuplicateID: a message id is already used in the tree or file.
	ErrDuplicateID = errors.New("duplicate message id")
	// ErrMissingParent: a message names a parent that does not exist.
	ErrMissingParent = errors.New("missing parent")
	// ErrNotLeaf: a message that must hang below a leaf names a parent
	// that already has a child (see [Tree.AppendLeaf]).
	ErrNotLeaf = errors.New("parent is not a leaf")
	// ErrCycle: parent links loop instead of reaching a root.
	ErrCycle = errors.New("parent cycle")
	// ErrNotFound: no message has the requested id.
	ErrNotFound = errors.New("message not found")
	// ErrOrphanResult: a tool result has no earlier, unanswered tool call with
	// its ToolCallID on the same branch.
	ErrOrphanResult = errors.New("tool result without its tool call")
	// ErrUnansweredCall: a tool call has no result, or a non-tool message
	// follows a tool call that is still unanswered.
	ErrUnansweredCall = errors.New("tool call without its result")
	// ErrInvalidConfig: a window or summary configuration is out of range.
	ErrInvalidConfig = errors.New("invalid config")
	// ErrMalformedEntry: a JSONL line cannot be decoded.
	ErrMalformedEntry = errors.New("malformed entry")
)
