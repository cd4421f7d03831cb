package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/tests/fakeollama"
	"github.com/ctxflow/ctxflow/workflows"
)

// TestWebPageStopAndApprovals (issue 25: "The page in Chromium: the
// approval buttons and the Stop button work") drives the page `ctxflow dev`
// serves, on a fake Ollama that streams a word every 100 ms:
//
//   - Stop: while a long answer streams, the Stop button shows; clicking it
//     cancels the turn (the server's turn is cancelled, its partial answer
//     kept as a cancelled message), the page shows the partial answer
//     marked cancelled, and the next question is answered as usual.
//   - Approvals, in a session whose run_sql calls wait for approval
//     (approveTools): tasks started in the page list their pending call
//     with Approve, Edit and Reject. Approve runs the call and the task
//     answers; Edit runs the call with the arguments edited in the page;
//     Reject with a message makes the rejection the step's observation and
//     the task goes on to its answer.
//
// Each check reads both the page and the server, so that a button that
// did nothing (or only seemed to) fails the test.
func TestWebPageStopAndApprovals(t *testing.T) {
	exe := chromium(t)
	fake := fakeollama.New(fakeollama.Options{ChunkDelay: 100 * time.Millisecond})
	fs := httptest.NewServer(fake)
	t.Cleanup(fs.Close)

	const (
		story    = "Tell me a long story"
		berlin   = `{"sql": "SELECT count(*) AS n FROM customers WHERE city = 'Berlin'"}`
		paris    = `{"sql": "SELECT count(*) AS n FROM customers WHERE city = 'Paris'"}`
		rejected = "I was not allowed to count them."
	)
	script := &textCallScript{step: func(req fakeollama.ChatRequestLite) string {
		if m := lastMessage(req); m.Role == "tool" {
			if strings.Contains(m.Content, "rejected by the user") {
				return rejected
			}
			return countAnswer(m.Content)
		}
		return "I will count them.\n<tool_call>\n{\"name\": \"run_sql\", \"arguments\": " + berlin + "}\n</tool_call>"
	}}
	fake.SetReply(func(req fakeollama.ChatRequestLite) string {
		switch {
		case len(req.Tools) == 0 && len(req.Format) > 0 && string(req.Format) != "null":
			return fakeollama.SchemaReply(req)
		case len(req.Tools) == 0 && lastMessage(req).Content == story:
			return storyWords
		}
		return script.reply(req)
	})

	dir := t.TempDir()
	httpPort := freePort(t)
	env := []string{
		fmt.Sprintf("CTXFLOW_HTTP_ADDR=127.0.0.1:%d", httpPort),
		fmt.Sprintf("CTXFLOW_UI_PORT=%d", freePort(t)),
		fmt.Sprintf("CTXFLOW_TEMPORAL_PORT=%d", freePort(t)),
		"CTXFLOW_DATA_DIR=" + dir,
		"CTXFLOW_TRANSCRIPT_FSYNC=false",
		"OLLAMA_HOST=" + fs.URL,
	}
	api := apiClient{base: fmt.Sprintf("http://127.0.0.1:%d", httpPort)}
	log := filepath.Join(dir, "dev.log")
	start := time.Now()
	startDev(t, env, api, log)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if code, err := api.do(ctx, http.MethodPost, "/v1/sessions", map[string]any{"sessionId": "gate",
		"config": map[string]any{"approveTools": []string{"run_sql"}}}, nil); code != http.StatusCreated {
		t.Fatalf("create session: %d %v", code, err)
	}
	t.Logf("ctxflow dev ready in %s", time.Since(start).Round(time.Millisecond))

	b := newBrowser(t, exe, log)
	b.do("open the session", chromedp.Navigate(api.base+"/#session=gate"))
	b.wait("the empty session", `document.querySelector('#current')?.textContent === 'gate'
		&& !!document.querySelector('#messages .empty')`)

	var got string
	{ // Stop
		b.do("ask for a long story", chromedp.SetValue(chromedp.ID("question"), story), chromedp.Click(chromedp.ID("send")))
		// The Stop button shows while the answer streams into the page.
		b.wait("the streaming answer and the Stop button", `!document.querySelector('#stop').hidden
			&& !document.querySelector('#stop').disabled
			&& (document.querySelector('#live .bubble.assistant.streaming .text')?.textContent || '').split(' ').length > 5`)
		b.shot("10-streaming")
		b.do("stop", chromedp.Click(chromedp.ID("stop")))
		b.wait("the cancelled answer", `!document.querySelector('#live').children.length
			&& document.querySelectorAll('#messages .bubble.assistant').length === 1
			&& document.querySelector('#stop').hidden && !document.querySelector('#send').disabled`)
		b.shot("11-stopped")

		// The server: the turn is cancelled, its partial answer kept as a
		// cancelled message.
		var msgs struct {
			Messages []convo.Message `json:"messages"`
		}
		if _, err := api.do(ctx, http.MethodGet, "/v1/sessions/gate/messages", nil, &msgs); err != nil || len(msgs.Messages) != 2 {
			t.Fatalf("messages: %v %+v", err, msgs.Messages)
		}
		answer := msgs.Messages[1]
		if answer.Role != convo.RoleAssistant || answer.Meta[convo.MetaStatus] != convo.StatusCancelled ||
			!strings.HasPrefix(storyWords, answer.Content) || len(answer.Content) == 0 || len(answer.Content) >= len(strings.TrimSpace(storyWords)) {
			t.Fatalf("the stopped answer on the server: %+v", answer)
		}
		var turn workflows.TurnResult
		if _, err := api.do(ctx, http.MethodGet, "/v1/sessions/gate/turns/"+answer.Meta["turnId"], nil, &turn); err != nil ||
			turn.Status != workflows.TurnCancelled {
			t.Errorf("the stopped turn %q on the server: %v %s", answer.Meta["turnId"], err, turn.Status)
		}
		// The page: the same partial answer, marked cancelled.
		b.eval(`(() => {
			const a = document.querySelector('#messages .bubble.assistant');
			return JSON.stringify({text: a.querySelector('.text').textContent, cancelled: a.classList.contains('cancelled'),
				badge: a.querySelector('.badge')?.textContent || ''});
		})()`, &got)
		var shown struct {
			Text      string `json:"text"`
			Cancelled bool   `json:"cancelled"`
			Badge     string `json:"badge"`
		}
		if err := json.Unmarshal([]byte(got), &shown); err != nil || shown.Text != answer.Content || !shown.Cancelled || shown.Badge != "cancelled" {
			t.Errorf("the page shows the stopped answer as %s (%v), want %q marked cancelled", got, err, answer.Content)
		}

		// The next question is answered as usual.
		b.do("ask again", chromedp.SetValue(chromedp.ID("question"), "And now a short one?"), chromedp.Click(chromedp.ID("send")))
		b.wait("the next answer", `document.querySelectorAll('#messages .bubble.assistant').length === 2
			&& !document.querySelector('#live').children.length`)
		b.eval(`(() => {
			const a = [...document.querySelectorAll('#messages .bubble.assistant')].at(-1);
			return (a.classList.contains('cancelled') ? 'cancelled ' : '') + a.querySelector('.text').textContent;
		})()`, &got)
		if !strings.HasPrefix(got, "answer ") || strings.Contains(got, "once upon") {
			t.Errorf("the next answer on the page: %q", got)
		}
		if _, err := api.do(ctx, http.MethodGet, "/v1/sessions/gate/messages", nil, &msgs); err != nil || len(msgs.Messages) != 4 ||
			msgs.Messages[3].Content != got || msgs.Messages[3].Meta[convo.MetaStatus] != "" {
			t.Errorf("messages after the next turn: %v %+v", err, msgs.Messages)
		}
		var stats string
		b.eval(`JSON.stringify(window.ctxflow.stats)`, &stats)
		if stats != `{"streamed":2,"resumed":0,"polled":0}` {
			t.Errorf("turns followed: %s, want both streamed to their end", stats)
		}
	}

	shop := filepath.Join(dir, "demo", "shop.db")
	// startTask starts a task in the page and waits for its call to wait
	// for approval; it returns the task's id.
	startTask := func(goal string) string {
		t.Helper()
		b.do("start a task", chromedp.SetValue(chromedp.ID("task-goal"), goal), chromedp.Click(chromedp.ID("task-start")))
		b.wait("the call waiting for approval", `document.querySelector('#task-status')?.textContent === 'awaiting_approval'
			&& document.querySelector('#task-view .goal')?.textContent === `+jsString(goal)+`
			&& document.querySelectorAll('#task-pending li.pending-call').length === 1
			&& !document.querySelector('#task-pending button.approve').disabled`)
		var view struct {
			Task struct {
				TaskID  string                  `json:"taskId"`
				Status  string                  `json:"status"`
				Pending []workflows.PendingCall `json:"pending"`
			} `json:"task"`
		}
		if _, err := api.do(ctx, http.MethodGet, "/v1/sessions/gate", nil, &view); err != nil || view.Task.Status != workflows.TaskAwaiting {
			t.Fatalf("GET session: %v %+v", err, view)
		}
		st, err := api.taskState(ctx, "gate", view.Task.TaskID)
		if err != nil || st.Goal != goal || st.Status != workflows.TaskAwaiting || len(st.Pending) != 1 {
			t.Fatalf("GET task: %v %+v", err, st)
		}
		p := st.Pending[0]
		b.eval(`(() => {
			const li = document.querySelector('#task-pending li.pending-call');
			return JSON.stringify({call: li.dataset.call, tool: li.querySelector('code').textContent,
				args: li.querySelector('textarea.args').value,
				buttons: [...li.querySelectorAll('button')].map((b) => b.textContent)});
		})()`, &got)
		var shown struct {
			Call, Tool, Args string
			Buttons          []string
		}
		if err := json.Unmarshal([]byte(got), &shown); err != nil || shown.Call != p.CallID || shown.Tool != "run_sql" || shown.Args != p.Arguments ||
			strings.Join(shown.Buttons, ",") != "Approve,Edit,Reject" {
			t.Fatalf("the page shows the pending call as %s (%v), want %+v", got, err, p)
		}
		return st.TaskID
	}
	// finished waits for the page to show the task's answer, and returns
	// the task's state on the server.
	finished := func(id, answer string) workflows.TaskState {
		t.Helper()
		b.wait("the task's answer", `document.querySelector('#task-status')?.textContent === 'finished'
			&& document.querySelector('#task-answer')?.textContent === `+jsString(answer)+`
			&& !document.querySelector('#task-pending')`)
		st, err := api.taskState(ctx, "gate", id)
		if err != nil || st.Status != workflows.TaskFinished || st.Answer != answer || len(st.Pending) != 0 || len(st.Steps) != 2 {
			t.Fatalf("GET task: %v %+v", err, st)
		}
		return st
	}

	{ // Approve
		id := startTask("How many customers live in 'Berlin'?")
		b.do("scroll to the task", chromedp.ScrollIntoView(chromedp.ID("panel-task")))
		b.shot("12-approval")
		b.do("approve", clickOn("#task-pending button.approve"))
		st := finished(id, fmt.Sprintf("There are %d customers.", customersIn(t, shop, "Berlin")))
		if s := st.Steps[0]; s.Tool != "run_sql" || !s.OK || !strings.Contains(s.Args, "'Berlin'") {
			t.Errorf("the approved step: %+v", s)
		}
		b.shot("13-approved")
	}

	{ // Edit
		id := startTask("How many customers live in 'Berlin', really?")
		// Arguments that are not JSON, then not an object: the page, then
		// the server, refuses them; the call still waits, and what was
		// typed stays in the box to be fixed.
		for _, bad := range []struct{ args, says string }{{`{"sql": `, "not valid JSON"}, {`[1]`, "invalid_argument"}} {
			b.do("edit with "+bad.args, typeInto("#task-pending textarea.args", bad.args),
				clickOn("#task-pending button.edit"))
			b.wait("the refused edit", `(document.querySelector('#task-view .error')?.textContent || '').includes(`+jsString(bad.says)+`)
				&& document.querySelector('#task-pending textarea.args')?.value === `+jsString(bad.args)+`
				&& !document.querySelector('#task-pending button.edit').disabled`)
			if st, err := api.taskState(ctx, "gate", id); err != nil || st.Status != workflows.TaskAwaiting || len(st.Pending) != 1 || st.Step != 1 {
				t.Fatalf("after the refused edit %s: %v %+v", bad.args, err, st)
			}
		}
		b.do("edit the arguments", typeInto("#task-pending textarea.args", paris),
			clickOn("#task-pending button.edit"))
		st := finished(id, fmt.Sprintf("There are %d customers.", customersIn(t, shop, "Paris")))
		// The tool ran the edited call: its arguments, and the result the
		// model read.
		if s := st.Steps[0]; s.Tool != "run_sql" || !s.OK || !strings.Contains(s.Args, "'Paris'") || strings.Contains(s.Args, "Berlin") {
			t.Errorf("the edited step: %+v", s)
		}
		b.shot("14-edited")
	}

	{ // Reject
		id := startTask("How many customers live in 'Berlin', once more?")
		b.do("reject with a message", typeInto("#task-pending input.note", "not during business hours"),
			clickOn("#task-pending button.reject"))
		st := finished(id, rejected)
		if s := st.Steps[0]; s.Tool != "run_sql" || s.OK || !strings.Contains(s.Observation, "rejected by the user: not during business hours") {
			t.Errorf("the rejected step: %+v", s)
		}
		b.do("open the steps", chromedp.Click(chromedp.CSS("#task-view details summary")))
		b.eval(`document.querySelector('#task-view ol.task-steps li.failed')?.textContent || ''`, &got)
		if !strings.Contains(got, "rejected by the user: not during business hours") {
			t.Errorf("the page's rejected step: %q", got)
		}
		b.shot("15-rejected")
	}

	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("the page raised errors:\n%s", strings.Join(errs, "\n"))
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// typeInto sets the value of the element sel names and fires its input
// event in one step, as typing does: the pending calls' boxes keep what is
// typed across the panel's re-renders by their input events, which
// chromedp.SetValue alone does not fire (a re-render between it and the
// click lost the value).
func typeInto(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`(() => { const el = document.querySelector(` + jsString(sel) + `);
		el.value = ` + jsString(value) + `; el.dispatchEvent(new Event('input', { bubbles: true })); })()`)
}

// clickOn clicks the element sel names as it is at that moment: the task
// panel re-renders while its task is read, and a node chromedp found a
// moment before may be gone ("No node with given id found").
func clickOn(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`document.querySelector(` + jsString(sel) + `).click()`)
}
