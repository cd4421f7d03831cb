package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// Names of the task workflow and its handlers.
const (
	TaskWorkflowName = "TaskWorkflow"
	// SignalTaskEvent is the signal a task sends its session when it
	// pauses, finishes or fails.
	SignalTaskEvent = "task-event"
	// SignalCancel cancels a task.
	SignalCancel = "cancel"
)

// Task statuses.
const (
	TaskRunning  = "running"
	TaskPaused   = "paused"
	TaskFinished = "finished"
	TaskFailed   = "failed"
	TaskCanceled = "canceled"
)

// Task result types (a turn's type too; TypeApproval too).
const (
	TypePause  = "pause"
	TypeFinish = "finish"
	TypeError  = "error"
)

// TaskInput starts an agent task.
type TaskInput struct {
	Tenant    string `json:"tenant"`
	SessionID string `json:"sessionId"`
	TaskID    string `json:"taskId"`
	Goal      string `json:"goal"`
	// MaxSteps is the steps run before the task pauses with a progress
	// summary (and again after each continue).
	MaxSteps int    `json:"maxSteps"`
	Model    string `json:"model"`
	// Facts are what the session's earlier tasks found.
	Facts activities.KnownFacts `json:"facts,omitzero"`
	// Notify is the workflow to send task events to ("" for none).
	Notify string `json:"notify,omitempty"`
	Limits Limits `json:"limits"`
	// RecentMessages and ObservationChars shape the model view
	// (MESSAGE_COMPRESS_RECENT_WINDOW, MESSAGE_COMPRESS_MAX_LENGTH are the
	// worker's).
	RecentMessages int `json:"recentMessages,omitempty"`
	// ApproveTools are glob patterns of tool names whose calls wait for
	// approval (the session's approveTools); ApprovalTimeout, when set,
	// rejects a call not decided in time.
	ApproveTools    []string      `json:"approveTools,omitempty"`
	ApprovalTimeout time.Duration `json:"approvalTimeout,omitempty"`
}

// TaskState is a task's state: the state query, the events and the result.
type TaskState struct {
	TaskID     string `json:"taskId"`
	WorkflowID string `json:"workflowId"`
	Goal       string `json:"goal"`
	Status     string `json:"status"`
	// Step is the number of the last step; Budget the step at which the
	// task pauses next.
	Step   int `json:"step"`
	Budget int `json:"budget"`
	// Steps are every step, compact (the full step log is the task's
	// transcript: GET .../tasks/{taskId}).
	Steps []activities.StepRecord `json:"steps"`
	// Summary is the last progress summary; Answer the final answer.
	Summary string                `json:"summary,omitempty"`
	Answer  string                `json:"answer,omitempty"`
	Error   string                `json:"error,omitempty"`
	Facts   activities.KnownFacts `json:"facts,omitzero"`
	Pauses  int                   `json:"pauses"`
	Engine  string                `json:"engine,omitempty"`
	// Leaf is the task transcript's last message; RunningSummary names the
	// summary of its older steps.
	Leaf           string                 `json:"leaf"`
	RunningSummary *activities.SummaryRef `json:"runningSummary,omitempty"`
	UpdatedAt      time.Time              `json:"updatedAt"`
	// Pending are the calls waiting for approval.
	Pending []PendingCall `json:"pending,omitempty"`
	// Guidance is what people told the task while it ran (clipped), with
	// the step each came before.
	Guidance []Guidance `json:"guidance,omitempty"`
}

// TaskEvent is what a task tells its session.
type TaskEvent struct {
	TaskID string `json:"taskId"`
	// Type is pause, finish or error.
	Type  string    `json:"type"`
	State TaskState `json:"state"`
}

var agent *activities.Agent // method references only

// TaskWorkflow is an agent task (seed 001, 002): think → act → observe, a
// tool call a step, until the planner answers. After MaxSteps steps it
// writes a progress summary, pauses, and waits — durably, without a
// timeout — for continue (a signal, or an update whose caller waits for
// the next pause or the end), then goes on with the same context and
// another MaxSteps steps. A cancel ends it. Step bodies live in the task's
// transcript; its history holds ids and compact records.
func TaskWorkflow(ctx workflow.Context, in TaskInput) (TaskState, error) {
	t := &task{in: in, limits: in.Limits.withDefaults(), factsDirty: !in.Facts.IsZero()}
	t.st = TaskState{TaskID: in.TaskID, WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, Goal: in.Goal,
		Status: TaskRunning, Budget: max(in.MaxSteps, 1), Steps: []activities.StepRecord{}, Facts: in.Facts, UpdatedAt: workflow.Now(ctx)}
	t.key = activities.TaskKey(activities.SessionKey{Tenant: in.Tenant, SessionID: in.SessionID}, in.TaskID)
	if err := t.setup(ctx); err != nil {
		return t.st, err
	}
	t.publish(ctx)
	err := t.run(ctx)
	t.st.UpdatedAt = workflow.Now(ctx)
	return t.st, err
}

type task struct {
	in        TaskInput
	limits    Limits
	st        TaskState
	key       activities.SessionKey
	catalog   map[string]activities.ToolInfo
	continues int // continue requests not yet acted on
	canceled  bool
	// stopThink cancels the step's model call (since change
	// "task-cancel-think"): a cancel does not wait for the model's answer.
	stopThink func()
	waiting   int // continue updates whose callers wait
	// factsID is the facts record the model calls read; factsDirty says
	// the facts changed since it was saved.
	factsID    string
	factsN     int
	factsDirty bool
	// stretch is the index of the first step since the last pause.
	stretch int
	// toolsID names the record of the task's remote (MCP) tools ("" for
	// none).
	toolsID string
	// decided are the decisions on calls at the approval gate, by call
	// id; rounds counts the times the task waited for approval.
	decided map[string]ApprovalDecision
	rounds  int
	// guidance is the guidance received and not yet in the transcript.
	guidance []Guidance
}

func (t *task) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (TaskState, error) { return t.st, nil }); err != nil {
		return fmt.Errorf("set state query: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateContinue, t.onContinue, workflow.UpdateHandlerOptions{
		Validator: func(ctx workflow.Context) error {
			if t.st.Status != TaskPaused {
				return activities.Permanent(activities.CodeConflict, fmt.Sprintf("task %s is %s, not paused", t.in.TaskID, t.st.Status), nil)
			}
			return nil
		},
	}); err != nil {
		return fmt.Errorf("set continue update: %w", err)
	}
	if err := t.setupApproval(ctx); err != nil {
		return fmt.Errorf("set approval update: %w", err)
	}
	cont := workflow.GetSignalChannel(ctx, SignalContinue)
	cancel := workflow.GetSignalChannel(ctx, SignalCancel)
	steer := workflow.GetSignalChannel(ctx, SignalSteer)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var g Guidance
			steer.Receive(ctx, &g)
			t.guidance = append(t.guidance, g)
		}
	})
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			cont.Receive(ctx, nil)
			t.continues++
		}
	})
	workflow.Go(ctx, func(ctx workflow.Context) {
		cancel.Receive(ctx, nil)
		t.canceled = true
		if t.stopThink != nil {
			t.stopThink()
		}
	})
	return nil
}

// onContinue resumes a paused task and returns at its next pause or end.
func (t *task) onContinue(ctx workflow.Context) (TaskState, error) {
	t.waiting++
	defer func() { t.waiting-- }()
	t.continues++
	pauses := t.st.Pauses
	err := workflow.Await(ctx, func() bool { return t.done() || t.st.Pauses > pauses })
	return t.st, err
}

func (t *task) done() bool {
	return t.st.Status == TaskFinished || t.st.Status == TaskFailed || t.st.Status == TaskCanceled
}

func (t *task) localCtx(ctx workflow.Context, summary string) workflow.Context {
	return localCtx(ctx, summary)
}

func (t *task) actx(ctx workflow.Context, summary string, timeout time.Duration, attempts int) workflow.Context {
	return activityCtx(ctx, t.limits, summary, timeout, attempts)
}

// taskCancelThinkChange: a cancel cancels the step's model call instead of
// waiting for its answer.
const taskCancelThinkChange = "task-cancel-think"

func (t *task) run(ctx workflow.Context) error {
	catalog, err := t.listTools(ctx)
	if err != nil {
		return t.fail(ctx, "list the tools", err)
	}
	t.catalog = make(map[string]activities.ToolInfo, len(catalog))
	for _, c := range catalog {
		t.catalog[c.Name] = c
	}
	err = workflow.ExecuteLocalActivity(t.localCtx(ctx, "store the goal"), agent.StartTask,
		activities.StartTaskInput{Task: t.key, Goal: t.in.Goal}).Get(ctx, &t.st.Leaf)
	if err != nil {
		return t.fail(ctx, "store the goal", err)
	}
	for {
		if t.canceled {
			return t.cancel(ctx)
		}
		if t.st.Step >= t.st.Budget {
			if err := t.pause(ctx); err != nil {
				return err
			}
			if t.canceled {
				return t.cancel(ctx)
			}
			continue
		}
		if err := t.guide(ctx); err != nil {
			return t.fail(ctx, "guidance", err)
		}
		t.st.Step++
		answered, err := t.step(ctx)
		if err != nil {
			return t.fail(ctx, fmt.Sprintf("step %d", t.st.Step), err)
		}
		if answered {
			t.st.Status = TaskFinished
			t.st.UpdatedAt = workflow.Now(ctx)
			t.notify(ctx, TypeFinish)
			return t.settle(ctx)
		}
	}
}

// listTools lists the tools the task may call. Since change
// "remote-tools" an activity lists the worker's own and the MCP servers'
// and records the latter: its result, in the history, is the task's tool
// list for its whole life (replay never asks a server, every step offers
// the same tools). Before, a local activity listed the worker's own.
func (t *task) listTools(ctx workflow.Context) ([]activities.ToolInfo, error) {
	var catalog []activities.ToolInfo
	if workflow.GetVersion(ctx, "remote-tools", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		err := workflow.ExecuteLocalActivity(t.localCtx(ctx, "list the tools"), agent.ToolCatalog).Get(ctx, &catalog)
		return catalog, err
	}
	var list activities.ToolList
	err := workflow.ExecuteActivity(t.actx(ctx, "list the tools", listToolsTimeout, 3), agent.ListTools,
		activities.ListToolsInput{Task: t.key}).Get(ctx, &list)
	if len(list.Unavailable) > 0 {
		workflow.GetLogger(ctx).Warn("tool servers unavailable: their tools are not offered", "task", t.in.TaskID, "unavailable", list.Unavailable)
	}
	t.toolsID = list.RecordID
	return list.Tools, err
}

// listToolsTimeout bounds a listing of the tools (each MCP server is given
// 30 s, all at once).
const listToolsTimeout = 2 * time.Minute

// step runs one think → act → observe step; it reports whether the task
// has its answer.
func (t *task) step(ctx workflow.Context) (bool, error) {
	if err := t.saveFacts(ctx); err != nil {
		return false, err
	}
	var th activities.ThinkResult
	thinkCtx := ctx
	if workflow.GetVersion(ctx, taskCancelThinkChange, workflow.DefaultVersion, 1) == 1 {
		var stop workflow.CancelFunc
		thinkCtx, stop = workflow.WithCancel(ctx)
		t.stopThink = func() { stop() }
		defer func() { t.stopThink = nil }()
	}
	err := workflow.ExecuteActivity(t.actx(thinkCtx, fmt.Sprintf("step %d: think", t.st.Step), t.limits.LLMTimeout, 3), agent.Think, activities.ThinkInput{
		Task: t.key, Goal: t.in.Goal, Step: t.st.Step, Leaf: t.st.Leaf, SummaryID: t.summaryID(), Window: t.window(),
		FactsID: t.factsID, ToolsID: t.toolsID, Steps: t.recentSteps(), Model: t.in.Model, Options: activities.ModelOptions{NumPredict: t.limits.LLMMaxTokens},
	}).Get(ctx, &th)
	if t.canceled && thinkCtx != ctx {
		return false, nil // the model call was cancelled: the task ends canceled
	}
	if err != nil {
		return false, err
	}
	t.st.Leaf = th.Leaf
	if th.Engine != "" {
		t.st.Engine = th.Engine
	}
	switch {
	case th.Answer != "":
		t.st.Answer = th.Answer
		t.record(activities.StepRecord{N: t.st.Step, OK: true, Observation: convo.Clip(th.Answer, 160)})
		return true, nil
	case th.ParseError != "":
		t.record(activities.StepRecord{N: t.st.Step, Observation: "json_parse_error: " + th.ParseError})
		return false, nil
	}
	decisions, err := t.approve(ctx, th)
	if err != nil || t.canceled {
		return false, err
	}
	for _, c := range th.Calls {
		d, gated := decisions[c.ID]
		if gated && d.Decision == DecisionReject {
			obs := rejection(d)
			if err := workflow.ExecuteLocalActivity(t.localCtx(ctx, "record the rejection"), agent.RecordToolError,
				activities.RecordToolErrorInput{Task: t.key, CallID: c.ID, Error: obs, Observation: obs, ParentID: t.st.Leaf}).Get(ctx, nil); err != nil {
				return false, err
			}
			t.st.Leaf = c.ID + ".r"
			t.record(activities.StepRecord{N: t.st.Step, Tool: c.Name, Args: c.Args, Observation: "error: " + convo.Clip(obs, 150)})
			continue
		}
		var edited []byte
		if gated && d.Decision == DecisionEdit {
			edited = d.Arguments
			c.Args = convo.Clip(string(edited), 200)
		}
		info, ok := t.catalog[c.Name]
		if !ok { // unknown: the activity answers with an error observation
			info = activities.ToolInfo{Name: c.Name, Timeout: 30 * time.Second, Attempts: 1}
		}
		var out activities.CallToolResult
		err := workflow.ExecuteActivity(t.actx(ctx, fmt.Sprintf("step %d: %s", t.st.Step, c.Name), info.Timeout, info.Attempts), agent.CallTool,
			activities.CallToolInput{Task: t.key, CallID: c.ID, Window: t.window(), SummaryConfig: t.summaryConfig(), SummaryID: t.summaryID(), ToolsID: t.toolsID,
				ParentID: t.st.Leaf, Args: edited}).Get(ctx, &out)
		if err != nil {
			// The tool failed after its retries: an observation too, and the
			// transcript keeps the call answered.
			msg := rootMessage(err)
			if err := workflow.ExecuteLocalActivity(t.localCtx(ctx, "record the tool's failure"), agent.RecordToolError,
				activities.RecordToolErrorInput{Task: t.key, CallID: c.ID, Error: msg, ParentID: t.st.Leaf}).Get(ctx, nil); err != nil {
				return false, err
			}
			out = activities.CallToolResult{ResultID: c.ID + ".r", Tool: c.Name, Observation: "error: the tool failed after its retries: " + convo.Clip(msg, 120)}
			t.learn(activities.KnownFacts{ErrorHistory: []string{c.Name + ": " + msg}})
		}
		t.st.Leaf = out.ResultID
		t.learn(out.Facts)
		t.record(activities.StepRecord{N: t.st.Step, Tool: c.Name, Args: c.Args, OK: out.OK, Observation: out.Observation})
		if out.SummaryDue {
			t.summarize(ctx)
		}
	}
	return false, nil
}

// maxStepRecords bounds the steps a step's input carries (a planner reads
// the last one's outcome): the view has the recent steps verbatim, the
// summary and the facts the older ones.
const maxStepRecords = 1

func (t *task) recentSteps() []activities.StepRecord {
	return t.st.Steps[max(0, len(t.st.Steps)-maxStepRecords):]
}

func (t *task) record(s activities.StepRecord) {
	t.st.Steps = append(t.st.Steps, s)
}

// learn merges what a step found into the task's facts.
func (t *task) learn(f activities.KnownFacts) {
	if !f.IsZero() {
		t.st.Facts.Merge(f)
		t.factsDirty = true
	}
}

// saveFacts stores the facts, when they changed, as the record the next
// model calls read (a local activity: its input is not in the history).
func (t *task) saveFacts(ctx workflow.Context) error {
	if !t.factsDirty {
		return nil
	}
	t.factsN++
	id := fmt.Sprintf("f%d", t.factsN)
	err := workflow.ExecuteLocalActivity(t.localCtx(ctx, "save the known facts"), agent.SaveFacts, activities.SaveFactsInput{
		Task: t.key, ID: id, ParentID: t.factsID, Facts: t.st.Facts,
	}).Get(ctx, nil)
	if err != nil {
		return err
	}
	t.factsID, t.factsDirty = id, false
	return nil
}

// pause writes the progress summary, tells the session, and waits for a
// continue (or a cancel).
func (t *task) pause(ctx workflow.Context) error {
	if err := t.saveFacts(ctx); err != nil {
		return t.fail(ctx, "save the known facts", err)
	}
	var pr activities.ProgressResult
	err := workflow.ExecuteActivity(t.actx(ctx, fmt.Sprintf("progress summary after step %d", t.st.Step), t.limits.LLMTimeout, 3), agent.Progress,
		activities.ProgressInput{Task: t.key, Goal: t.in.Goal, Step: t.st.Step, Leaf: t.st.Leaf, FactsID: t.factsID, Steps: t.st.Steps[t.stretch:], Model: t.in.Model}).Get(ctx, &pr)
	if err != nil {
		return t.fail(ctx, "progress summary", err)
	}
	t.st.Leaf, t.st.Summary = pr.MessageID, pr.Summary
	t.st.Status, t.st.Pauses = TaskPaused, t.st.Pauses+1
	t.st.UpdatedAt = workflow.Now(ctx)
	t.notify(ctx, TypePause)
	if err := workflow.Await(ctx, func() bool { return t.continues > 0 || t.canceled }); err != nil {
		return err
	}
	if t.canceled {
		return nil
	}
	t.continues = 0
	id := fmt.Sprintf("s%d.continue", t.st.Step)
	err = workflow.ExecuteLocalActivity(t.localCtx(ctx, "continue"), agent.AppendTaskMessage, activities.AppendInput{
		Task: t.key, ID: id, ParentID: t.st.Leaf, Role: convo.RoleUser, Content: "continue",
	}).Get(ctx, nil)
	if err != nil {
		return t.fail(ctx, "continue", err)
	}
	t.st.Leaf, t.stretch = id, len(t.st.Steps)
	t.st.Status, t.st.Budget = TaskRunning, t.st.Step+max(t.in.MaxSteps, 1)
	t.st.UpdatedAt = workflow.Now(ctx)
	t.publish(ctx)
	return nil
}

// summarize folds older steps into the task's running summary; a failure
// leaves the view as it is (the window still bounds it).
func (t *task) summarize(ctx workflow.Context) {
	var out activities.SummarizeResult
	err := workflow.ExecuteActivity(t.actx(ctx, "summarize older steps", t.limits.LLMTimeout, 3), sa.Summarize, activities.SummarizeInput{
		Session: t.key, LeafID: t.st.Leaf, Window: t.window(), Config: t.summaryConfig(), PrevID: t.summaryID(),
	}).Get(ctx, &out)
	if err != nil {
		workflow.GetLogger(ctx).Warn("task summary failed: the view stays a window", "task", t.in.TaskID, "error", err)
		return
	}
	if out.Ref != nil && (t.st.RunningSummary == nil || out.Ref.ID != t.st.RunningSummary.ID) {
		t.st.RunningSummary = out.Ref
		t.st.Leaf = out.Ref.ID // the record hangs below the leaf
	}
}

func (t *task) summaryID() string {
	if t.st.RunningSummary == nil {
		return ""
	}
	return t.st.RunningSummary.ID
}

// window is the task's model view: the recent messages, within a token
// budget; older steps go to the running summary.
func (t *task) window() convo.WindowConfig {
	return convo.WindowConfig{Strategy: convo.StrategyTokenLimit, MaxTokens: 6000, TokenStrategy: convo.TokenStrategyLast}
}

// summaryConfig folds older steps once more than RecentMessages (default
// 10) are unfolded.
func (t *task) summaryConfig() convo.SummaryConfig {
	c := convo.DefaultSummaryConfig()
	c.ThresholdMessages = t.in.RecentMessages
	if c.ThresholdMessages <= 0 {
		c.ThresholdMessages = 10
	}
	c.ThresholdTokens = 4000
	c.Model = t.in.Model
	return c
}

func (t *task) fail(ctx workflow.Context, what string, err error) error {
	t.st.Status, t.st.Error = TaskFailed, what+": "+rootMessage(err)
	t.st.UpdatedAt = workflow.Now(ctx)
	workflow.GetLogger(ctx).Warn("task failed", "task", t.in.TaskID, "error", err)
	t.notify(ctx, TypeError)
	return t.settle(ctx)
}

func (t *task) cancel(ctx workflow.Context) error {
	t.st.Status, t.st.Error = TaskCanceled, "canceled"
	t.st.UpdatedAt = workflow.Now(ctx)
	t.notify(ctx, TypeError)
	return t.settle(ctx)
}

// settle lets waiting continue callers see the end before the run ends.
func (t *task) settle(ctx workflow.Context) error {
	return workflow.Await(ctx, func() bool { return t.waiting == 0 })
}

// notify tells the session (if any) where the task stands. A session that
// is gone is logged, not fatal: the task's own result holds the state.
func (t *task) notify(ctx workflow.Context, typ string) {
	t.publish(ctx)
	if t.in.Notify == "" {
		return
	}
	ev := TaskEvent{TaskID: t.in.TaskID, Type: typ, State: t.compact()}
	if err := workflow.SignalExternalWorkflow(ctx, t.in.Notify, "", SignalTaskEvent, ev).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("task event not delivered", "task", t.in.TaskID, "session", t.in.Notify, "error", err)
	}
}

// publish shows the task's status to operators: the CtxStatus search
// attribute (running, paused, finished, failed, canceled) and the UI
// details.
func (t *task) publish(ctx workflow.Context) {
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**Task** `%s` of session `%s` (tenant `%s`)\n\n- status: %s, step %d of %d, pauses: %d\n- goal: %s",
		t.in.TaskID, t.in.SessionID, t.in.Tenant, t.st.Status, t.st.Step, t.st.Budget, t.st.Pauses, convo.Clip(t.in.Goal, 200)))
	err := workflow.UpsertTypedSearchAttributes(ctx, SAttrTenant.ValueSet(t.in.Tenant), SAttrStatus.ValueSet(t.st.Status),
		SAttrUpdatedAt.ValueSet(workflow.Now(ctx)))
	if err != nil {
		workflow.GetLogger(ctx).Warn("publish task status", "task", t.in.TaskID, "error", err)
	}
}

// maxEventSteps bounds the steps an event carries (a session keeps turn
// results): the task's state query has them all.
const maxEventSteps = 12

func (t *task) compact() TaskState {
	st := t.st
	st.Steps = append([]activities.StepRecord(nil), st.Steps[max(0, len(st.Steps)-maxEventSteps):]...)
	return st
}
