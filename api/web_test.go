package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/api"
)

// TestWebPage: / is the page, and it loads its script as a module.
func TestWebPage(t *testing.T) {
	w := do(server(newFake(t)), http.MethodGet, "/", "")
	if w.Code != http.StatusOK {
		t.Fatalf("GET / = %d %s", w.Code, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	for _, want := range []string{`<script type="module" src="/ui/app.js">`, `href="/ui/style.css"`, `name="viewport"`} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if w := do(server(newFake(t)), http.MethodHead, "/", ""); w.Code != http.StatusOK || w.Body.Len() != 0 ||
		w.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("HEAD / = %d, %d bytes, %q", w.Code, w.Body.Len(), w.Header().Get("Content-Type"))
	}
}

// TestWebAssets follows every module import from the page and checks that
// each asset is served with its content type: a module with a wrong type,
// or an import of a file that is not embedded, breaks the page.
func TestWebAssets(t *testing.T) {
	h := server(newFake(t))
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	imports := regexp.MustCompile(`(?m)^import .* from '([^']+)';$|(?:src|href)="(/ui/[^"]+)"`)
	queue := []string{"/ui/app.js", "/ui/style.css"}
	seen := map[string]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		w := do(h, http.MethodGet, p, "")
		if w.Code != http.StatusOK {
			t.Errorf("GET %s = %d", p, w.Code)
			continue
		}
		if ct, want := w.Header().Get("Content-Type"), types[path.Ext(p)]; ct != want {
			t.Errorf("GET %s: Content-Type %q, want %q", p, ct, want)
		}
		if w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", p)
		}
		for _, m := range imports.FindAllStringSubmatch(w.Body.String(), -1) {
			if m[1] != "" {
				queue = append(queue, path.Join(path.Dir(p), m[1]))
			}
		}
	}
	for _, want := range []string{"/ui/api.js", "/ui/dom.js", "/ui/panels/chat.js", "/ui/panels/timeline.js", "/ui/panels/task.js"} {
		if !seen[want] {
			t.Errorf("%s is not imported by the page", want)
		}
	}
}

// TestWebUnknownAsset: anything that is not an embedded asset is a JSON
// 404, including paths that try to leave the asset folder.
func TestWebUnknownAsset(t *testing.T) {
	h := server(newFake(t))
	for _, p := range []string{"/ui/nope.js", "/ui/panels/", "/ui/", "/ui/../web.go", "/ui/%2e%2e/web.go", "/ui/panels/../../web.go", "/ui/index"} {
		wantError(t, do(h, http.MethodGet, p, ""), http.StatusNotFound, "not_found")
	}
	// A long name is not echoed whole.
	w := do(h, http.MethodGet, "/ui/"+strings.Repeat("a", 10<<10)+".js", "")
	if b := wantError(t, w, http.StatusNotFound, "not_found"); len(b.Error.Message) > 200 {
		t.Errorf("the error echoes %d bytes of the name", len(b.Error.Message))
	}
}

// TestWebNeedsNoKey: with API keys the page still loads (it sends the key
// the user enters with its /v1 calls), while /v1 needs a key.
func TestWebNeedsNoKey(t *testing.T) {
	opts := options()
	sum := sha256.Sum256([]byte("cfk_web"))
	opts.Keys = map[string]string{hex.EncodeToString(sum[:]): "acme"}
	h := api.New(newFake(t), opts).Handler()
	for _, p := range []string{"/", "/ui/app.js"} {
		if w := do(h, http.MethodGet, p, ""); w.Code != http.StatusOK {
			t.Errorf("GET %s with keys = %d", p, w.Code)
		}
	}
	wantError(t, do(h, http.MethodGet, "/v1/sessions", ""), http.StatusUnauthorized, "unauthenticated")
}
