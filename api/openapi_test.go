package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/gin-gonic/gin"
)

// loadSpec loads and validates the embedded document, and returns it with
// a router over its operations.
func loadSpec(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openAPISpec)
	if err != nil {
		t.Fatalf("load openapi.json: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() || doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI 3.1 document: %v", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return doc, router
}

var ginParam = regexp.MustCompile(`:([A-Za-z]+)`)

// TestOpenAPICoversEveryRoute fails for a /v1 route without an operation in
// the document, and for an operation of no route.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	doc, _ := loadSpec(t)
	routes := New(nil, Options{}).Handler().(*gin.Engine).Routes()
	registered := map[string]bool{}
	for _, r := range routes {
		if !strings.HasPrefix(r.Path, "/v1/") {
			continue
		}
		path := ginParam.ReplaceAllString(r.Path, "{$1}")
		registered[r.Method+" "+path] = true
		if item := doc.Paths.Value(path); item == nil || item.GetOperation(r.Method) == nil {
			t.Errorf("%s %s is not in openapi.json", r.Method, path)
		}
	}
	if len(registered) < 24 {
		t.Fatalf("only %d /v1 routes registered: %v", len(registered), registered)
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !registered[method+" "+path] {
				t.Errorf("openapi.json has %s %s, which Handler does not register", method, path)
			}
		}
	}
}

// TestOpenAPIErrorCodes checks the document against the one status table
// of api/errors.go: the ErrorCode enum is its codes, and each error
// response of a status allows exactly the codes of that status.
func TestOpenAPIErrorCodes(t *testing.T) {
	loadSpec(t)
	var raw struct {
		Paths      map[string]map[string]json.RawMessage
		Components struct {
			Schemas   map[string]struct{ Enum []string }
			Responses map[string]struct {
				Content map[string]struct {
					Schema struct {
						Properties struct {
							Error struct {
								Properties struct {
									Code struct {
										Enum  []string
										Const string
									}
								}
							}
						}
					}
				}
			}
		}
	}
	if err := json.Unmarshal(openAPISpec, &raw); err != nil {
		t.Fatal(err)
	}
	byStatus := map[int][]string{}
	var all []string
	for code, a := range answers {
		byStatus[a.status] = append(byStatus[a.status], code)
		all = append(all, code)
	}
	slices.Sort(all)
	if got := slices.Sorted(slices.Values(raw.Components.Schemas["ErrorCode"].Enum)); !slices.Equal(got, all) {
		t.Errorf("ErrorCode enum = %v, want the codes of api/errors.go %v", got, all)
	}
	component := map[int]string{400: "BadRequest", 401: "Unauthorized", 404: "NotFound", 409: "Conflict", 413: "TooLarge", 429: "Overloaded", 500: "Internal", 503: "Unavailable"}
	for status, codes := range byStatus {
		name, ok := component[status]
		if !ok {
			t.Errorf("status %d (codes %v) has no error response in openapi.json", status, codes)
			continue
		}
		c := raw.Components.Responses[name].Content["application/json"].Schema.Properties.Error.Properties.Code
		got := c.Enum
		if c.Const != "" {
			got = []string{c.Const}
		}
		if slices.Sort(codes); !slices.Equal(slices.Sorted(slices.Values(got)), codes) {
			t.Errorf("response %s allows codes %v, want those of status %d: %v", name, got, status, codes)
		}
	}
	// Every operation's error statuses use the response of that status.
	for path, item := range raw.Paths {
		for method, op := range item {
			var o struct {
				Responses map[string]struct {
					Ref string `json:"$ref"`
				}
			}
			if method == "parameters" || json.Unmarshal(op, &o) != nil {
				continue
			}
			for status, r := range o.Responses {
				n, _ := strconv.Atoi(status)
				if want := "#/components/responses/" + component[n]; n >= 400 && r.Ref != want {
					t.Errorf("%s %s: response %s is %q, want %s", method, path, status, r.Ref, want)
				}
			}
		}
	}
}

// TestOpenAPIServed serves the document at GET /v1/openapi.json, and the
// answers that need no Temporal validate against it.
func TestOpenAPIServed(t *testing.T) {
	_, router := loadSpec(t)
	sum := sha256.Sum256([]byte("cfk_test"))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := New(nil, Options{Logger: quiet, MaxBodyBytes: 64}).Handler()
	keyed := New(nil, Options{Logger: quiet, Keys: map[string]string{hex.EncodeToString(sum[:]): "acme"}}).Handler()
	for _, tc := range []struct {
		name         string
		h            http.Handler
		method, path string
		body         string
		key          string
		want         int
	}{
		{"document", keyed, "GET", "/v1/openapi.json", "", "cfk_test", 200},
		{"no key", keyed, "GET", "/v1/openapi.json", "", "", 401},
		{"unknown key", keyed, "POST", "/v1/sessions/s1/turns", `{"question":"hi"}`, "cfk_other", 401},
		{"bad status", open, "GET", "/v1/sessions?status=bogus", "", "", 400},
		{"bad body", open, "POST", "/v1/sessions", "{", "", 400},
		{"too large", open, "POST", "/v1/sessions", `{"title":"` + strings.Repeat("x", 100) + `"}`, "", 413},
		{"messages", open, "GET", "/v1/sessions/s1/messages", "", "", 503},
		{"tree", open, "GET", "/v1/sessions/s1/tree", "", "", 503},
		{"export", open, "GET", "/v1/sessions/s1/export", "", "", 503},
		{"uploads off", open, "POST", "/v1/documents", "text", "", 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			if tc.key != "" {
				req.Header.Set("Authorization", "Bearer "+tc.key)
			}
			w := httptest.NewRecorder()
			tc.h.ServeHTTP(w, req)
			if w.Code != tc.want {
				t.Fatalf("%s %s = %d %s, want %d", tc.method, tc.path, w.Code, w.Body, tc.want)
			}
			if tc.name == "document" && !bytes.Equal(w.Body.Bytes(), openAPISpec) {
				t.Fatal("GET /v1/openapi.json is not the embedded document")
			}
			route, params, err := router.FindRoute(req)
			if err != nil {
				t.Fatalf("route %s %s: %v", tc.method, tc.path, err)
			}
			in := &openapi3filter.ResponseValidationInput{
				RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
				Status:                 w.Code, Header: w.Header(), Body: io.NopCloser(w.Body),
				Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
			}
			if err := openapi3filter.ValidateResponse(t.Context(), in); err != nil {
				t.Errorf("%s %s: the answer does not match openapi.json: %v", tc.method, tc.path, err)
			}
		})
	}
}
