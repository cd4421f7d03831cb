package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

// chromium returns the path of a headless Chromium: scripts/chromium.sh
// installs Debian's package when it is missing. A browser that cannot be
// had fails the test; nothing skips.
func chromium(t *testing.T) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("../scripts/chromium.sh")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/chromium.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// browser drives one page of a headless Chromium and fails the test on
// any exception or console error the page raises.
type browser struct {
	t    *testing.T
	ctx  context.Context
	dir  string // screenshots
	log  string // ctxflow dev's log, shown when a wait fails
	mu   sync.Mutex
	errs []string
}

func newBrowser(t *testing.T, exe, log string) *browser {
	t.Helper()
	alloc, cancel := chromedp.NewExecAllocator(t.Context(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1280, 900), chromedp.Flag("lang", "en-US"))...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	b := &browser{t: t, ctx: ctx, dir: filepath.Join("artifacts", "web"), log: log}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	messages := chromedp.Console(ctx) // starts the browser
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			// Network errors (the 401 before the key is set) are the
			// browser's log (Source "network"): the page shows them.
			if m.IsException() || (m.Type == chromedp.ConsoleError && m.Source == "") {
				b.mu.Lock()
				b.errs = append(b.errs, m.String())
				b.mu.Unlock()
			}
		}
	}()
	return b
}

func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.fail(what, err)
	}
}

// fail stops the test with what the page shows and the server's log.
func (b *browser) fail(what string, err error) {
	b.t.Helper()
	b.shot("failed")
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	out, _ := os.ReadFile(b.log)
	b.t.Fatalf("%s: %v\npage:\n%s\nctxflow dev:\n%s", what, err, tail(text, 3000), tail(string(out), 3000))
}

// wait waits until the JavaScript expression is truthy.
func (b *browser) wait(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithDeadline(b.ctx, deadline.Add(5*time.Second))
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond),
			chromedp.WithPollingTimeout(time.Until(deadline))))
		cancel()
		switch {
		case err == nil:
			return
		case errors.Is(err, chromedp.ErrPollingTimeout) || time.Now().After(deadline):
			b.fail("waiting for "+what, err)
		}
		time.Sleep(50 * time.Millisecond) // the page navigated: poll the new one
	}
}

func (b *browser) eval(expr string, out *string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.fail(expr, err)
	}
	*out = v
}

func (b *browser) shot(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	img, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // PNG
	if err == nil {
		err = os.WriteFile(filepath.Join(b.dir, name+".png"), img, 0o644)
	}
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
}

func (b *browser) pageErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errs...)
}

const webDoc = `# Pixel 8 notes

The Pixel 8 costs 699 dollars in the United States.
The Pixel 8 comes in three colors: obsidian, hazel and rose.
Pixel 8 的电池容量是 4575 毫安时，支持 27 瓦快充。
`

// TestWebPage opens the page `ctxflow dev` serves in headless Chromium,
// with an API key: the missing key is shown as an error, then a session
// holds a conversation with a Chinese follow-up (streamed, each turn's
// step timeline with durations and the corrective loop's decision path),
// a standalone corrective query, an agent task that pauses and is
// continued with the button, an edited question and the branch switcher,
// and the same session at phone width. Screenshots go to
// tests/artifacts/web/.
func TestWebPage(t *testing.T) {
	exe := chromium(t)
	dir := t.TempDir()
	httpPort, uiPort := freePort(t), freePort(t)
	const key = "cfk_web_test"
	sum := sha256.Sum256([]byte(key))
	env := []string{
		fmt.Sprintf("CTXFLOW_HTTP_ADDR=127.0.0.1:%d", httpPort),
		fmt.Sprintf("CTXFLOW_UI_PORT=%d", uiPort),
		fmt.Sprintf("CTXFLOW_TEMPORAL_PORT=%d", freePort(t)),
		"CTXFLOW_DATA_DIR=" + dir,
		"CTXFLOW_MODEL_PROVIDER=offline",
		"CTXFLOW_TRANSCRIPT_FSYNC=false",
		"CTXFLOW_API_KEYS=acme:" + hex.EncodeToString(sum[:]),
	}
	api := apiClient{base: fmt.Sprintf("http://127.0.0.1:%d", httpPort), key: key}
	log := filepath.Join(dir, "dev.log")
	start := time.Now()
	startDev(t, env, api, log)
	ingest(t, api, "pixel", webDoc)
	t.Logf("ctxflow dev ready and a document ingested in %s", time.Since(start).Round(time.Millisecond))

	// The page goes through a proxy that can drop a stream or refuse to
	// stream, to exercise the page's resume and fallback.
	target, _ := url.Parse(api.base)
	proxy := &faultProxy{rp: httputil.NewSingleHostReverseProxy(target)}
	proxy.rp.FlushInterval = -1
	front := httptest.NewServer(proxy)
	defer front.Close()

	b := newBrowser(t, exe, log)
	uiBase := fmt.Sprintf("http://127.0.0.1:%d", uiPort)
	page := front.URL + "/?temporalUI=" + url.QueryEscape(uiBase)

	// Without the key, the list says why it is empty.
	b.do("open the page", chromedp.Navigate(page))
	b.wait("the missing key's error", `document.querySelector('#session-list .error')?.textContent.includes('API key')`)
	b.shot("01-no-key")
	b.do("enter the key", chromedp.Click(chromedp.CSS(".settings summary")), chromedp.SetValue(chromedp.ID("api-key"), key),
		chromedp.Click(chromedp.ID("save-settings")))
	b.wait("the session list", `document.querySelector('#session-list .empty')?.textContent.includes('No sessions yet')`)

	// A session, created in the page; its workflow in the Temporal UI.
	b.do("create a session", chromedp.SetValue(chromedp.ID("new-session"), "web"), chromedp.Click(chromedp.ID("create-session")))
	link := uiBase + "/namespaces/default/workflows/" + url.PathEscape(workflows.SessionWorkflowID("acme", "web"))
	b.wait("the Temporal UI link", fmt.Sprintf(`document.querySelector('#temporal-link').href === %q`, link))
	if resp, err := http.Get(link); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the Temporal UI link %s: %v %v", link, err, resp)
	} else {
		resp.Body.Close()
	}

	// A conversation with a follow-up in Chinese.
	ask := func(n int, q string) {
		b.do("ask "+q, chromedp.SetValue(chromedp.ID("question"), q), chromedp.Click(chromedp.ID("send")))
		b.wait(fmt.Sprintf("answer %d", n), fmt.Sprintf(`document.querySelectorAll('#messages .bubble.assistant').length === %d
			&& !document.querySelector('#live').children.length`, n))
	}
	ask(1, "How much does the Pixel 8 cost?")
	ask(2, "它的电池容量是多少？")
	var got string
	b.eval(`[...document.querySelectorAll('#messages .bubble')].map(e => e.querySelector('.text')?.textContent).join('\n')`, &got)
	for _, want := range []string{"How much does the Pixel 8 cost?", "699", "它的电池容量是多少？", "4575", "(offline engine)"} {
		if !strings.Contains(got, want) {
			t.Errorf("the conversation lacks %q:\n%s", want, got)
		}
	}
	// The last turn's timeline: every step with a duration, the rewrite,
	// and the corrective loop's decision path and verdicts.
	b.eval(`(() => {
		const turn = [...document.querySelectorAll('#messages details.turn')].at(-1);
		const steps = [...turn.querySelectorAll('li.step')].map(s => s.dataset.step + ' ' + s.querySelector('.dur').textContent);
		return [steps.join(', '), turn.querySelector('.facts').textContent,
			[...turn.querySelectorAll('.decision-path li')].map(l => l.textContent).join(' | '),
			turn.querySelector('.grader').textContent, turn.querySelectorAll('.verdicts li.kept').length].join('\n');
	})()`, &got)
	t.Logf("the follow-up's timeline:\n%s", got)
	for _, want := range []string{"load_context ", "rewrite_query ", "corrective_rag ", "save ", " ms", "Rewritten query", "Topic",
		"retrieve ", "generate", "Grader: "} {
		if !strings.Contains(got, want) {
			t.Errorf("the timeline lacks %q", want)
		}
	}
	// The documents the answer came from, with their text.
	b.eval(`[...[...document.querySelectorAll('#messages details.turn')].at(-1).querySelectorAll('.docs p.doc')].map(p => p.textContent).join('\n')`, &got)
	if !strings.Contains(got, "4575") || strings.Contains(got, "(no text)") {
		t.Errorf("the follow-up's documents:\n%s", got)
	}
	var stats string
	b.eval(`JSON.stringify(window.ctxflow.stats)`, &stats)
	if stats != `{"streamed":2,"resumed":0,"polled":0}` {
		t.Errorf("turns followed: %s, want both streamed to their final event", stats)
	}
	b.shot("02-conversation")

	// A stream dropped after its first step resumes from its last event;
	// a server that answers JSON instead of a stream is polled.
	proxy.mode.Store("drop")
	ask(3, "What colors does it come in?")
	proxy.mode.Store("json")
	ask(4, "它支持多少瓦快充？")
	b.eval(`JSON.stringify(window.ctxflow.stats)`, &stats)
	if stats != `{"streamed":3,"resumed":1,"polled":1}` || proxy.lastEventID() == "" {
		t.Errorf("turns followed: %s, resumed after event %q; want a resumed and a polled turn", stats, proxy.lastEventID())
	}
	b.eval(`[...document.querySelectorAll('#messages .bubble.assistant')].slice(2).map(e => e.textContent).join('\n')`, &got)
	if !strings.Contains(got, "obsidian") || !strings.Contains(got, "27 瓦") {
		t.Errorf("the resumed and polled answers:\n%s", got)
	}

	// A corrective query: the decision path and the graded documents.
	b.do("a corrective query", chromedp.SetValue(chromedp.ID("rag-query"), "What colors does the Pixel 8 come in?"),
		chromedp.Click(chromedp.ID("rag-run")))
	b.wait("the decision path", `document.querySelectorAll('#rag-result .decision-path li').length >= 2`)
	b.eval(`document.querySelector('#rag-result').innerText`, &got)
	for _, want := range []string{"retrieve \"What colors does the Pixel 8 come in?\"", "grade: ", "generate", "obsidian", "pixel#"} {
		if !strings.Contains(got, want) {
			t.Errorf("the corrective result lacks %q:\n%s", want, got)
		}
	}
	b.do("scroll to the corrective result", chromedp.ScrollIntoView(chromedp.ID("rag-result")))
	b.shot("03-corrective")

	// An agent task that pauses after 3 steps, continued with the button.
	b.do("start a task", chromedp.SetValue(chromedp.ID("task-goal"), "How many rows does each table of the shop have?"),
		chromedp.SetValue(chromedp.ID("task-max-steps"), "3"), chromedp.Click(chromedp.ID("task-start")))
	b.wait("the paused task", `document.querySelector('#task-status')?.textContent === 'paused'
		&& document.querySelector('#task-step').textContent === 'step 3 of 3'`)
	b.eval(`document.querySelector('#task-summary').textContent`, &got)
	if !strings.Contains(got, "Goal: How many rows does each table of the shop have?") || !strings.Contains(got, "Done: 3 steps") {
		t.Errorf("progress summary:\n%s", got)
	}
	b.do("scroll to the task", chromedp.ScrollIntoView(chromedp.ID("panel-task")))
	b.shot("04-task-paused")
	b.do("continue", chromedp.Click(chromedp.ID("task-continue")))
	b.wait("the task's next pause", `document.querySelector('#task-step')?.textContent === 'step 6 of 6'
		&& document.querySelector('#task-status').textContent === 'paused'`)
	b.shot("05-task-continued")

	// Edit the first question: a second branch, and the switcher.
	b.do("edit the first question", chromedp.Click(chromedp.CSS("#messages .bubble.user .edit")))
	b.do("ask the edited question", chromedp.SetValue(chromedp.CSS("#messages textarea.edit"), "Pixel 8 多少钱？"),
		chromedp.Click(chromedp.CSS("#messages form.editing button.primary")))
	first := `document.querySelector('#messages .bubble.user')`
	b.wait("the edited branch", first+`?.querySelector('.text').textContent === 'Pixel 8 多少钱？'
		&& `+first+`.querySelector('.switcher .pos')?.textContent === '2/2'
		&& document.querySelectorAll('#messages .bubble.assistant').length === 1
		&& document.querySelectorAll('#branches li').length === 2`)
	b.shot("06-edited")
	b.do("switch back", chromedp.Click(chromedp.CSS(`#messages .switcher button[title="previous version"]`)))
	b.wait("the first branch again", first+`?.querySelector('.text').textContent === 'How much does the Pixel 8 cost?'
		&& `+first+`.querySelector('.switcher .pos')?.textContent === '1/2'`)
	var active struct {
		Messages []convo.Message `json:"messages"`
	}
	if _, err := api.do(t.Context(), http.MethodGet, "/v1/sessions/web/messages", nil, &active); err != nil || len(active.Messages) < 6 ||
		active.Messages[0].Content != "How much does the Pixel 8 cost?" {
		t.Errorf("after switching back, the active branch is %+v (%v)", active.Messages, err)
	}
	// View the other branch without moving to it.
	b.do("view the edited branch", chromedp.Click(chromedp.CSS("#branches li:not(.active) .view")))
	b.wait("the viewed branch", `document.querySelector('.banner')?.textContent.includes('Viewing the branch')
		&& `+first+`?.querySelector('.text').textContent === 'Pixel 8 多少钱？'`)
	b.do("back to the active branch", chromedp.Click(chromedp.CSS(".banner button:last-child")))
	b.wait("the active branch", `!document.querySelector('.banner').textContent
		&& `+first+`?.querySelector('.text').textContent === 'How much does the Pixel 8 cost?'`)

	// Phone width: one column, nothing wider than the screen.
	b.do("phone width", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Reload())
	b.wait("the session at phone width", `document.querySelectorAll('#messages .bubble.assistant').length >= 2
		&& document.querySelector('#task-status')?.textContent === 'paused'`)
	var width string
	b.eval(`String(document.documentElement.scrollWidth)`, &width)
	if width != "390" {
		t.Errorf("at 390 px the page is %s px wide", width)
	}
	b.shot("07-phone")

	// ?temporalUI= holds for its page only, and only as an http(s) URL: a
	// link can point the Temporal links neither at a script nor, for good,
	// anywhere else.
	fallback := fmt.Sprintf("http://%s:8233/namespaces/default/workflows/", strings.Split(strings.TrimPrefix(front.URL, "http://"), ":")[0])
	for _, q := range []string{"?temporalUI=" + url.QueryEscape("javascript:alert(document.cookie)"), ""} {
		b.do("open "+q, chromedp.Navigate(front.URL+"/"+q+"#session=web"))
		b.wait("the session's Temporal link", `!document.querySelector('#temporal-link').hidden && !!document.querySelector('#temporal-link').href`)
		var href string
		b.eval(`document.querySelector('#temporal-link').href`, &href)
		if !strings.HasPrefix(href, fallback) {
			t.Errorf("after %q the Temporal link is %q, want this host's port 8233", q, href)
		}
	}

	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("the page raised errors:\n%s", strings.Join(errs, "\n"))
	}
	t.Logf("done in %s; screenshots in tests/%s", time.Since(start).Round(time.Millisecond), b.dir)
}

// ingest uploads a markdown document and waits for its ingestion.
func ingest(t *testing.T, api apiClient, id, text string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, api.base+"/v1/documents?wait=true&id="+id, strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/markdown")
	req.Header.Set("Authorization", "Bearer "+api.key)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		t.Fatal(errors.New("ingest: " + resp.Status + " " + b.String()))
	}
}

// faultProxy passes requests to the API; its mode, used once by the next
// turn request, drops that stream after its first step event ("drop") or
// asks for JSON instead of a stream ("json").
type faultProxy struct {
	rp   *httputil.ReverseProxy
	mode atomic.Value
	mu   sync.Mutex
	last string // the Last-Event-ID of the last resume
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/turns") {
		switch mode, _ := p.mode.Swap("").(string); mode {
		case "json":
			r.Header.Del("Accept")
		case "drop":
			w = &dropAfterStep{ResponseWriter: w}
		}
	}
	if strings.HasSuffix(r.URL.Path, "/events") {
		p.mu.Lock()
		p.last = r.Header.Get("Last-Event-ID")
		p.mu.Unlock()
	}
	p.rp.ServeHTTP(w, r)
}

func (p *faultProxy) lastEventID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// dropAfterStep writes a stream up to the end of its first step event,
// then breaks the connection.
type dropAfterStep struct{ http.ResponseWriter }

func (d *dropAfterStep) Write(b []byte) (int, error) {
	i := bytes.Index(b, []byte("event: step\n"))
	if i < 0 {
		return d.ResponseWriter.Write(b)
	}
	end := i + bytes.Index(b[i:], []byte("\n\n")) + 2
	_, _ = d.ResponseWriter.Write(b[:end])
	http.NewResponseController(d.ResponseWriter).Flush()
	// The events written reach the page before the connection breaks: a
	// browser may discard what came with the break (the first step event
	// now comes right after the accepted one, in the same read).
	time.Sleep(200 * time.Millisecond)
	panic(http.ErrAbortHandler)
}

func (d *dropAfterStep) Flush() { _ = http.NewResponseController(d.ResponseWriter).Flush() }

func (d *dropAfterStep) Unwrap() http.ResponseWriter { return d.ResponseWriter }
