package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// The approval gate (issue 25, item 1): a call of a tool that requires
// approval waits, durably, for a person's decision.
const (
	// TaskAwaiting is the status of a task whose calls wait for approval
	// (CtxStatus=awaiting_approval).
	TaskAwaiting = "awaiting_approval"
	// TypeApproval is the event (and turn type) of a task that waits for
	// approval.
	TypeApproval = "approval"
	// UpdateApproval decides a pending call of a task.
	UpdateApproval = "approval"
	// approvalChange gates the approval gate in task histories.
	approvalChange = "approval-gate"
)

// Decisions on a pending call.
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
	DecisionEdit    = "edit"
)

// PendingCall is a tool call that waits for approval.
type PendingCall struct {
	CallID string `json:"callId"`
	Tool   string `json:"tool"`
	// Arguments are the call's arguments as the model wrote them (clipped).
	Arguments string `json:"arguments"`
	// Reason is the model's thought before the call, if it gave one.
	Reason    string     `json:"reason,omitempty"`
	Step      int        `json:"step"`
	Since     time.Time  `json:"since"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// Decision is set once decided, while other calls of the step wait.
	Decision string `json:"decision,omitempty"`
}

// ApprovalDecision is a person's decision on a pending call: the argument
// of UpdateApproval.
type ApprovalDecision struct {
	CallID   string `json:"callId"`
	Decision string `json:"decision"`
	// Arguments replace the call's (edit only): a JSON object.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Message is the person's word: a rejection's reason.
	Message string `json:"message,omitempty"`
}

// Validate checks a decision on its own.
func (d ApprovalDecision) Validate() error {
	if err := ValidateID("callId", d.CallID); err != nil {
		return err
	}
	switch d.Decision {
	case DecisionApprove, DecisionReject:
		if len(bytes.TrimSpace(d.Arguments)) > 0 {
			return fmt.Errorf("arguments go with decision %q only", DecisionEdit)
		}
	case DecisionEdit:
		var obj map[string]any
		if err := json.Unmarshal(d.Arguments, &obj); err != nil || obj == nil {
			return fmt.Errorf("decision %q needs arguments, a JSON object", DecisionEdit)
		}
		if len(d.Arguments) > 64<<10 {
			return fmt.Errorf("arguments are %d bytes, over the 64 KiB limit", len(d.Arguments))
		}
	default:
		return fmt.Errorf("decision %q: want %q, %q or %q", convo.Clip(d.Decision, 20), DecisionApprove, DecisionReject, DecisionEdit)
	}
	if len(d.Message) > 4<<10 {
		return fmt.Errorf("message is %d bytes, over the 4 KiB limit", len(d.Message))
	}
	return nil
}

// same reports the same decision (a repeat is idempotent).
func (d ApprovalDecision) same(o ApprovalDecision) bool {
	if d.Decision != o.Decision {
		return false
	}
	if d.Decision != DecisionEdit {
		return true
	}
	var a, b any
	_ = json.Unmarshal(d.Arguments, &a)
	_ = json.Unmarshal(o.Arguments, &b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// ValidateApproveTools checks the glob patterns of approveTools.
func ValidateApproveTools(patterns []string) error {
	if len(patterns) > 100 {
		return fmt.Errorf("approveTools has %d patterns, over 100", len(patterns))
	}
	for _, p := range patterns {
		if p == "" || len(p) > 200 {
			return fmt.Errorf("approveTools: pattern %q is empty or over 200 bytes", convo.Clip(p, 40))
		}
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("approveTools: pattern %q: %w", convo.Clip(p, 40), err)
		}
	}
	return nil
}

// union returns a's patterns, then b's that a lacks.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, p := range b {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// requiresApproval reports whether a call of the tool waits for approval:
// the tool says so, or a pattern of the session's approveTools (its
// tenant's included) names it.
func (t *task) requiresApproval(name string) bool {
	if info, ok := t.catalog[name]; ok && info.RequiresApproval {
		return true
	}
	for _, p := range t.in.ApproveTools {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

func (t *task) setupApproval(ctx workflow.Context) error {
	t.decided = map[string]ApprovalDecision{}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateApproval, t.onApproval, workflow.UpdateHandlerOptions{
		Validator: func(ctx workflow.Context, d ApprovalDecision) error {
			if err := d.Validate(); err != nil {
				return activities.Permanent(activities.CodeInvalidArgument, err.Error(), nil)
			}
			if prev, ok := t.decided[d.CallID]; ok {
				if !prev.same(d) {
					return activities.Permanent(activities.CodeConflict, fmt.Sprintf("call %s of task %s was decided already: %s", d.CallID, t.in.TaskID, prev.Decision), nil)
				}
				return nil
			}
			for _, p := range t.st.Pending {
				if p.CallID == d.CallID {
					return nil
				}
			}
			return activities.Permanent(activities.CodeNotFound, fmt.Sprintf("task %s has no call %s waiting for approval", t.in.TaskID, d.CallID), nil)
		},
	})
}

// onApproval records a decision. The last decision of a step's calls
// returns at the task's next stop (another approval, a pause, the end);
// the others, and repeats, at once.
func (t *task) onApproval(ctx workflow.Context, d ApprovalDecision) (TaskState, error) {
	if _, ok := t.decided[d.CallID]; ok {
		return t.st, nil
	}
	t.decided[d.CallID] = d
	open := false
	for i := range t.st.Pending {
		if t.st.Pending[i].CallID == d.CallID {
			t.st.Pending[i].Decision = d.Decision
		}
		if t.st.Pending[i].Decision == "" {
			open = true
		}
	}
	if open {
		return t.st, nil
	}
	t.waiting++
	defer func() { t.waiting-- }()
	rounds, pauses := t.rounds, t.st.Pauses
	err := workflow.Await(ctx, func() bool { return t.done() || t.st.Pauses > pauses || t.rounds > rounds })
	return t.st, err
}

// approve holds the step's calls that require approval until each is
// decided (or expires: a rejection), and returns the decisions by call id.
func (t *task) approve(ctx workflow.Context, th activities.ThinkResult) (map[string]ApprovalDecision, error) {
	var need []activities.CallRef
	for _, c := range th.Calls {
		if t.requiresApproval(c.Name) {
			need = append(need, c)
		}
	}
	if len(need) == 0 || workflow.GetVersion(ctx, approvalChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil, nil
	}
	now := workflow.Now(ctx)
	t.st.Pending = t.st.Pending[:0:0]
	for _, c := range need {
		p := PendingCall{CallID: c.ID, Tool: c.Name, Arguments: c.Args, Reason: th.Thought, Step: t.st.Step, Since: now}
		if t.in.ApprovalTimeout > 0 {
			e := now.Add(t.in.ApprovalTimeout)
			p.ExpiresAt = &e
		}
		t.st.Pending = append(t.st.Pending, p)
	}
	t.st.Status, t.st.UpdatedAt = TaskAwaiting, now
	t.rounds++
	t.notify(ctx, TypeApproval)
	decided := func() bool {
		if t.canceled {
			return true
		}
		for _, c := range need {
			if _, ok := t.decided[c.ID]; !ok {
				return false
			}
		}
		return true
	}
	if t.in.ApprovalTimeout > 0 {
		ok, err := workflow.AwaitWithTimeout(ctx, t.in.ApprovalTimeout, decided)
		if err != nil {
			return nil, err
		}
		if !ok {
			for _, c := range need {
				if _, ok := t.decided[c.ID]; !ok {
					t.decided[c.ID] = ApprovalDecision{CallID: c.ID, Decision: DecisionReject,
						Message: fmt.Sprintf("no decision within %s (approvalTimeout)", t.in.ApprovalTimeout)}
				}
			}
		}
	} else if err := workflow.Await(ctx, decided); err != nil {
		return nil, err
	}
	out := make(map[string]ApprovalDecision, len(need))
	for _, c := range need {
		if d, ok := t.decided[c.ID]; ok {
			out[c.ID] = d
		}
	}
	t.st.Pending = nil
	if !t.canceled {
		t.st.Status, t.st.UpdatedAt = TaskRunning, workflow.Now(ctx)
		t.publish(ctx)
	}
	return out, nil
}

// rejection is the observation of a rejected call.
func rejection(d ApprovalDecision) string {
	if d.Message == "" {
		return "rejected by the user"
	}
	return "rejected by the user: " + d.Message
}
