package docs

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/ctxflow/ctxflow/api"
	"github.com/ctxflow/ctxflow/internal/config"
)

// TestConfigurationTableIsCurrent: the table of configuration.md is
// config.Vars as go generate ./docs/ writes it.
func TestConfigurationTableIsCurrent(t *testing.T) {
	b, err := os.ReadFile("configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := WithConfigTable(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Error("docs/configuration.md is not config.Vars: run go generate ./docs/")
	}
}

// page is one Markdown file of the documentation.
type page struct{ name, text string }

// pages reads README.md and docs/*.md; docs says which are docs/ pages.
func pages(t *testing.T) (readme page, docs []page) {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme = page{"README.md", string(b)}
	names, err := filepath.Glob("*.md")
	if err != nil || len(names) < 5 {
		t.Fatalf("docs/*.md: %v %v", names, err)
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, page{"docs/" + n, string(b)})
	}
	return readme, docs
}

func TestReadme(t *testing.T) {
	readme, _ := pages(t)
	if n := strings.Count(readme.text, "\n"); n > 250 {
		t.Errorf("README.md has %d lines, want at most 250: move the detail into docs/", n)
	}
	if strings.Contains(readme.text, "../shared") {
		t.Error("README.md sends readers to ../shared, which users do not have")
	}
}

// envName is what the pages write as an environment variable: capitals,
// digits and at least one underscore, maybe ending in _* (a family).
var envName = regexp.MustCompile(`\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?:_\*)?`)

// externalEnv are variables that other software reads (the Temporal and
// OpenTelemetry SDKs, Ollama), which the pages may name.
var externalEnv = []string{
	"TEMPORAL_TLS_CERT", "TEMPORAL_TLS_KEY", // Temporal SDK's envconfig (TEMPORAL_TLS_* in config.Vars)
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_*", // OpenTelemetry's exporter
	"OLLAMA_MODELS", "OLLAMA_CONTEXT_LENGTH", // Ollama's own server
	"MESSAGE_ID", // not a variable: the argument of ctxflow chat's /branch
}

// knownEnv is every variable a page may name: config.Vars (each of a row's
// names), the Makefile's variables, the names Go code and scripts use as
// environment variables (tests' and benchmarks' knobs), and externalEnv.
func knownEnv(t *testing.T) (known map[string]bool, vars []string) {
	t.Helper()
	known = map[string]bool{}
	for _, v := range config.Vars {
		for n := range strings.SplitSeq(v.Name, ", ") {
			known[n] = true
			vars = append(vars, n)
		}
	}
	for _, n := range externalEnv {
		known[n] = true
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^(?:export )?([A-Z][A-Z0-9_]*)\s*[?:]?=`).FindAllStringSubmatch(string(mk), -1) {
		known[m[1]] = true
	}
	// A name in Go code as a whole string, or as NAME= in an environment
	// list; in a script, as $NAME, ${NAME or NAME=.
	goEnv := regexp.MustCompile(`"([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)[="]`)
	shEnv := regexp.MustCompile(`(?:\$\{?|\b)([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?:=|\b)`)
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != ".." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules" || n == "data" || n == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		re := goEnv
		switch {
		case strings.HasSuffix(path, ".go"):
		case strings.HasSuffix(path, ".sh"):
			re = shEnv
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			known[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return known, vars
}

// TestEnvironmentVariables: every environment variable the README and the
// docs name is read by ctxflow (config.Vars), its Makefile, its tests or
// scripts, or is another program's (externalEnv); and every variable of
// config.Vars is documented in docs/.
func TestEnvironmentVariables(t *testing.T) {
	readme, docs := pages(t)
	known, vars := knownEnv(t)
	documented := map[string]bool{}
	for _, p := range append([]page{readme}, docs...) {
		for _, n := range envName.FindAllString(p.text, -1) {
			if !known[n] {
				t.Errorf("%s names %s, which nothing reads (not in config.Vars, the Makefile, the code or externalEnv)", p.name, n)
			}
			if p.name != readme.name {
				documented[n] = true
			}
		}
	}
	for _, n := range vars {
		if !documented[n] {
			t.Errorf("config.Vars has %s, which no page of docs/ names", n)
		}
	}
}

// route is one route of the API's router, as a pattern.
type route struct {
	method, path string
	re           *regexp.Regexp
}

// routes are the router's routes (HEAD ones aside), with /metrics.
func routes(t *testing.T) []route {
	t.Helper()
	engine := api.New(nil, api.Options{Metrics: http.NotFoundHandler()}).Handler().(*gin.Engine)
	var rs []route
	param := regexp.MustCompile(`/:[^/]+`)
	wild := regexp.MustCompile(`/\*[^/]+$`)
	for _, r := range engine.Routes() {
		if r.Method == http.MethodHead {
			continue
		}
		p := param.ReplaceAllString(r.Path, "/\x00")
		p = wild.ReplaceAllString(p, "/\x01")
		p = regexp.QuoteMeta(p)
		p = strings.NewReplacer("\x00", `[^/]+`, "\x01", `.*`).Replace(p)
		rs = append(rs, route{r.Method, r.Path, regexp.MustCompile("^" + p + "$")})
	}
	if len(rs) < 30 {
		t.Fatalf("only %d routes: %v", len(rs), rs)
	}
	return rs
}

var (
	// methodPath is a route as the pages write it: GET /v1/sessions/{id}.
	methodPath = regexp.MustCompile("\\b(GET|POST|DELETE|PUT|PATCH) (/[^\\s`|)\"',\\]]*)")
	// curlURL is the path of a curl command's URL on the API's port.
	curlURL    = regexp.MustCompile(`(?:localhost|127\.0\.0\.1):8080(/[^\s"'?]*)?`)
	curlMethod = regexp.MustCompile(`-X ?([A-Z]+)`)
	curlData   = regexp.MustCompile(`\s(?:-d|--data\S*|-F)\s`)
	// placeholder is a path segment that stands for a value: {id}, <file>, :id.
	placeholder = regexp.MustCompile(`\{[^}/]*\}|<[^>/]*>|:[A-Za-z]+`)
)

// mention is a route a page names.
type mention struct{ page, method, path string }

// mentions are the routes a page names: METHOD /path anywhere, and the
// curl commands against the API (GET unless -X says otherwise or data is
// sent). Paths abbreviated with ... are left out.
func mentions(p page) []mention {
	var ms []mention
	add := func(method, path string) {
		path, _, _ = strings.Cut(path, "?")
		path = strings.TrimRight(path, ".:;")
		if path == "" {
			path = "/"
		}
		if strings.Contains(path, "...") || strings.Contains(path, "…") {
			return
		}
		ms = append(ms, mention{p.name, method, placeholder.ReplaceAllString(path, "x")})
	}
	for _, m := range methodPath.FindAllStringSubmatch(p.text, -1) {
		add(m[1], m[2])
	}
	for line := range strings.SplitSeq(p.text, "\n") {
		i := strings.Index(line, "curl ")
		if i < 0 {
			continue
		}
		cmd := line[i:]
		u := curlURL.FindStringSubmatch(cmd)
		if u == nil {
			continue
		}
		method := http.MethodGet
		if m := curlMethod.FindStringSubmatch(cmd); m != nil {
			method = m[1]
		} else if curlData.MatchString(cmd) {
			method = http.MethodPost
		}
		add(method, u[1])
	}
	return ms
}

// TestRoutes: every route the README and the docs name (METHOD /path, or a
// curl command on the API's port) is one the router serves, and every
// route it serves is named in docs/.
func TestRoutes(t *testing.T) {
	readme, docs := pages(t)
	rs := routes(t)
	documented := map[string]bool{}
	for _, p := range append([]page{readme}, docs...) {
		for _, m := range mentions(p) {
			i := slices.IndexFunc(rs, func(r route) bool { return r.method == m.method && r.re.MatchString(m.path) })
			if i < 0 {
				t.Errorf("%s names %s %s, which the router does not serve", m.page, m.method, m.path)
				continue
			}
			if p.name != readme.name {
				documented[rs[i].method+" "+rs[i].path] = true
			}
		}
	}
	for _, r := range rs {
		if !documented[r.method+" "+r.path] {
			t.Errorf("the router serves %s %s, which no page of docs/ names", r.method, r.path)
		}
	}
}

// TestAPITableIsOpenAPI: the route table of api.md has one row for each
// operation of api/openapi.json, and no other /v1 row.
func TestAPITableIsOpenAPI(t *testing.T) {
	b, err := os.ReadFile("../api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	norm := func(path string) string { return placeholder.ReplaceAllString(path, "x") }
	ops := map[string]bool{}
	for path, item := range doc.Paths {
		for method := range item {
			if method != "parameters" {
				ops[strings.ToUpper(method)+" "+norm(path)] = true
			}
		}
	}
	table, err := os.ReadFile("api.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(GET|POST|DELETE|PUT|PATCH) (/v1/[^`]*)`").FindAllStringSubmatch(string(table), -1) {
		op := m[1] + " " + norm(m[2])
		rows[op] = true
		if !ops[op] {
			t.Errorf("docs/api.md has a row for %s, which api/openapi.json lacks", op)
		}
	}
	for op := range ops {
		if !rows[op] {
			t.Errorf("api/openapi.json has %s, which the table of docs/api.md lacks", op)
		}
	}
}

// makeCommand is a make command in a code span or a code block's line.
var makeCommand = regexp.MustCompile(`(?m)(?:^|[;&]\s*|\$ |^\s*|` + "`" + `)make ([a-z][a-z0-9-]*)`)

// TestMakeTargets: every make target the README and the docs name is one
// of the Makefile's, and every target the Makefile documents (## target:)
// is named in docs/.
func TestMakeTargets(t *testing.T) {
	b, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	mk := string(b)
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):(?:[^=]|$)`).FindAllStringSubmatch(mk, -1) {
		targets[m[1]] = true
	}
	readme, docs := pages(t)
	documented := map[string]bool{}
	for _, p := range append([]page{readme}, docs...) {
		for _, m := range makeCommand.FindAllStringSubmatch(p.text, -1) {
			if !targets[m[1]] {
				t.Errorf("%s names make %s, which the Makefile lacks", p.name, m[1])
			}
			if p.name != readme.name {
				documented[m[1]] = true
			}
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^## ([a-z][a-z0-9-]*):`).FindAllStringSubmatch(mk, -1) {
		if !documented[m[1]] {
			t.Errorf("the Makefile documents make %s, which no page of docs/ names", m[1])
		}
	}
}

// TestLinks: every relative link of the README and the docs leads to a file
// of the repository, and its #anchor to a heading of the page.
func TestLinks(t *testing.T) {
	readme, docs := pages(t)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, p := range append([]page{readme}, docs...) {
		dir := filepath.Dir(filepath.Join("..", p.name))
		for _, m := range link.FindAllStringSubmatch(p.text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := filepath.Join("..", p.name)
			if file != "" {
				path = filepath.Join(dir, file)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				if _, serr := os.Stat(path); serr != nil {
					t.Errorf("%s links to %s: %v", p.name, target, serr)
				}
				continue
			}
			if anchor != "" && !slices.Contains(anchors(string(b)), anchor) {
				t.Errorf("%s links to %s: %s has no heading #%s", p.name, target, path, anchor)
			}
		}
	}
}

// anchors are the ids GitHub gives a page's headings.
func anchors(md string) []string {
	var ids []string
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	inCode := false
	for line := range strings.SplitSeq(md, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		ids = append(ids, strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-"))
	}
	return ids
}
