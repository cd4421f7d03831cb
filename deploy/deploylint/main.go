// Command deploylint does the checks of deploy/ that the maintained tools
// (kubeconform, compose-go) do not; scripts/deploycheck.sh runs it.
//
//	deploylint schemas SWAGGER DIR
//	    write the strict JSON schemas kubeconform reads, one file a kind
//	    (deployment-apps-v1.json, ...) referring to _definitions.json, from
//	    Kubernetes' OpenAPI v2 document (api/openapi-spec/swagger.json of
//	    the k8s.io/kubernetes module)
//	deploylint compose < MODEL
//	    check compose-go's model of a compose file (its -format json
//	    output): every service, volume and secret a service names is
//	    defined, a built service's Dockerfile exists, and the services built
//	    here set only variables ctxflow reads, to values it accepts
//	deploylint k8s FILE [FILE ...]
//	    check that every key of the data of a ConfigMap or a Secret named
//	    ctxflow… (data and stringData) is a variable ctxflow reads
//	    (deploy/k8s keeps ctxflow's environment there; Temporal's, in
//	    temporal.yaml, are its own), and that the values in plain text (data
//	    of a ConfigMap, stringData of a Secret) are ones it accepts
//
// Both take the variables and what each accepts from internal/config, where
// each is declared (config.Vars, config.Check).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxflow/ctxflow/internal/config"
)

const usage = "usage: deploylint schemas SWAGGER DIR | compose < MODEL.json | k8s FILE [FILE ...]"

func main() {
	err := errors.New(usage)
	switch {
	case len(os.Args) == 4 && os.Args[1] == "schemas":
		var n int
		if n, err = writeSchemas(os.Args[2], os.Args[3]); err == nil {
			fmt.Printf("deploylint: %d kinds' schemas in %s\n", n, os.Args[3])
		}
	case len(os.Args) == 2 && os.Args[1] == "compose":
		err = report(checkCompose(os.Stdin))
	case len(os.Args) > 2 && os.Args[1] == "k8s":
		err = report(checkK8sEnv(os.Args[2:]))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploylint:", err)
		os.Exit(1)
	}
}

func report(problems []string, err error) error {
	if err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problems", len(problems))
	}
	return nil
}

// writeSchemas turns an OpenAPI v2 document into kubeconform's layout:
// DIR/<kind><suffix>.json, the suffix as kubeconform derives it from the
// apiVersion ("-v1", "-apps-v1", "-autoscaling-v2", "-networking-v1"), each
// a $ref to its definition in DIR/_definitions.json. The definitions are
// strict (an object with properties admits no others, as kubectl
// validates) and say what the API server decodes: an IntOrString is a
// string or an integer, a Quantity a string or a number.
func writeSchemas(swagger, dir string) (int, error) {
	b, err := os.ReadFile(swagger)
	if err != nil {
		return 0, err
	}
	var spec struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		return 0, fmt.Errorf("%s: %w", swagger, err)
	}
	if len(spec.Definitions) == 0 {
		return 0, fmt.Errorf("%s: no definitions", swagger)
	}
	defs := map[string]any{}
	for name, d := range spec.Definitions {
		defs[name] = strict(d)
	}
	if _, ok := defs[quantity]; ok {
		defs[quantity] = map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
	}
	if err := writeJSON(filepath.Join(dir, "_definitions.json"), map[string]any{"definitions": defs}); err != nil {
		return 0, err
	}
	names := make([]string, 0, len(spec.Definitions))
	for name := range spec.Definitions {
		names = append(names, name)
	}
	slices.Sort(names) // io.k8s.api.* before io.k8s.apimachinery.*: a kind's own definition wins
	written := map[string]bool{}
	for _, name := range names {
		gvks, _ := spec.Definitions[name]["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			gvk, _ := g.(map[string]any)
			kind, _ := gvk["kind"].(string)
			group, _ := gvk["group"].(string)
			version, _ := gvk["version"].(string)
			if kind == "" || version == "" {
				continue
			}
			file := schemaFile(kind, group, version)
			if written[file] {
				continue
			}
			written[file] = true
			ref := map[string]any{"$ref": "_definitions.json#/definitions/" + name}
			if err := writeJSON(filepath.Join(dir, file), ref); err != nil {
				return 0, err
			}
		}
	}
	return len(written), nil
}

const quantity = "io.k8s.apimachinery.pkg.api.resource.Quantity"

// schemaFile is kubeconform's {{.ResourceKind}}{{.KindSuffix}}.json.
func schemaFile(kind, group, version string) string {
	suffix := "-" + version
	if group != "" {
		suffix = "-" + strings.Split(group, ".")[0] + "-" + version
	}
	return strings.ToLower(kind + suffix + ".json")
}

// strict returns a copy of an OpenAPI schema as a draft-4 JSON schema for
// kubeconform -strict: no descriptions or extensions, additionalProperties
// false where properties are listed and nothing else is said, and
// int-or-string as a string or an integer.
func strict(node any) any {
	m, ok := node.(map[string]any)
	if !ok {
		return node
	}
	if m["format"] == "int-or-string" {
		return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
	}
	out := map[string]any{}
	for k, v := range m {
		switch {
		case k == "description" || strings.HasPrefix(k, "x-"):
		case k == "properties":
			props := map[string]any{}
			for name, p := range v.(map[string]any) {
				props[name] = strict(p)
			}
			out[k] = props
		case k == "items" || k == "additionalProperties" || k == "not":
			out[k] = strict(v)
		case k == "allOf" || k == "anyOf" || k == "oneOf":
			var list []any
			for _, s := range v.([]any) {
				list = append(list, strict(s))
			}
			out[k] = list
		default:
			out[k] = v
		}
	}
	if _, ok := m["properties"]; ok {
		if _, ok := m["additionalProperties"]; !ok {
			out["additionalProperties"] = false
		}
	}
	return out
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// checkCompose reads compose-go's JSON model and lists its problems.
func checkCompose(r io.Reader) ([]string, error) {
	var m struct {
		Services map[string]struct {
			Build *struct {
				Context    string `json:"context"`
				Dockerfile string `json:"dockerfile"`
			} `json:"build"`
			DependsOn   map[string]any `json:"depends_on"`
			Environment map[string]any `json:"environment"`
			Volumes     []struct {
				Type   string `json:"type"`
				Source string `json:"source"`
			} `json:"volumes"`
			Secrets []struct {
				Source string `json:"source"`
			} `json:"secrets"`
		} `json:"services"`
		Volumes map[string]any `json:"volumes"`
		Secrets map[string]any `json:"secrets"`
	}
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		return nil, fmt.Errorf("compose model: %w", err)
	}
	if len(m.Services) == 0 {
		return nil, errors.New("compose model: no services")
	}
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf("compose: "+format, args...))
	}
	for name, s := range m.Services {
		for dep := range s.DependsOn {
			if _, ok := m.Services[dep]; !ok {
				add("service %s depends on %s, which is not a service", name, dep)
			}
		}
		for _, v := range s.Volumes {
			if _, ok := m.Volumes[v.Source]; v.Type == "volume" && v.Source != "" && !ok {
				add("service %s mounts volume %s, which is not declared under volumes", name, v.Source)
			}
		}
		for _, sec := range s.Secrets {
			if _, ok := m.Secrets[sec.Source]; !ok {
				add("service %s uses secret %s, which is not declared under secrets", name, sec.Source)
			}
		}
		if s.Build == nil {
			continue
		}
		df := s.Build.Dockerfile
		if df == "" {
			df = "Dockerfile"
		}
		if !filepath.IsAbs(df) {
			df = filepath.Join(s.Build.Context, df)
		}
		if _, err := os.Stat(df); err != nil {
			add("service %s is built from %s: %v", name, df, err)
		}
		for v, val := range s.Environment {
			if !ctxflowVar(v) {
				add("service %s sets %s, which ctxflow does not read (internal/config.Vars)", name, v)
			} else if text, ok := val.(string); ok {
				if err := config.Check(v, text); err != nil {
					add("service %s: %v", name, err)
				}
			}
		}
	}
	slices.Sort(problems)
	return problems, nil
}

var (
	docKind  = regexp.MustCompile(`^kind:\s*(\S+)`)
	envBlock = regexp.MustCompile(`^(data|stringData):\s*$`)
	blockKey = regexp.MustCompile(`^  ([^\s#][^:]*):(.*)$`)
)

// checkK8sEnv lists the keys of ctxflow's ConfigMaps' and Secrets' data
// (named ctxflow…) that are not ctxflow variables, and the plain values
// ctxflow would refuse. It reads the block style of deploy/k8s (kubeconform
// has validated the YAML): top-level metadata: with its name, data: and
// stringData:, keys indented by two, one-line values.
func checkK8sEnv(files []string) ([]string, error) {
	var problems []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		type entry struct {
			key, value string
			plain      bool // not base64 (a Secret's data)
		}
		var kind, name, block string
		var keys []entry
		flush := func() {
			if (kind == "ConfigMap" || kind == "Secret") && strings.HasPrefix(name, "ctxflow") {
				for _, k := range keys {
					if !ctxflowVar(k.key) {
						problems = append(problems, fmt.Sprintf("k8s: %s: %s key %s is not a variable ctxflow reads (internal/config.Vars)", f, kind, k.key))
					} else if v, ok := yamlScalar(k.value); ok && (kind == "ConfigMap" || k.plain) {
						if err := config.Check(k.key, v); err != nil {
							problems = append(problems, fmt.Sprintf("k8s: %s: %s: %v", f, kind, err))
						}
					}
				}
			}
			kind, name, keys = "", "", nil
		}
		inBlock := false
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "---"):
				flush()
				inBlock = false
			case line == "" || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "#"):
				k := blockKey.FindStringSubmatch(line)
				switch {
				case k != nil && inBlock:
					keys = append(keys, entry{strings.Trim(k[1], `"'`), k[2], block == "stringData"})
				case k != nil && block == "metadata" && k[1] == "name":
					name, _ = yamlScalar(k[2])
				}
			default:
				inBlock = envBlock.MatchString(line)
				block = strings.TrimSpace(strings.TrimSuffix(line, ":"))
				if k := docKind.FindStringSubmatch(line); k != nil {
					kind = k[1]
				}
			}
		}
		flush()
	}
	return problems, nil
}

// ctxflowVar tells whether ctxflow reads the variable: one of
// config.Vars, whose names may list several ("A, B_*, C").
func ctxflowVar(name string) bool {
	for _, v := range config.Vars {
		for n := range strings.SplitSeq(v.Name, ",") {
			n = strings.TrimSpace(n)
			if n == name || (strings.HasSuffix(n, "*") && strings.HasPrefix(name, strings.TrimSuffix(n, "*"))) {
				return true
			}
		}
	}
	return false
}

// yamlScalar reads the one-line value after a key: plain (up to a " #"
// comment), "double-quoted" or 'single-quoted'. False for what it does not
// read (block scalars, flow collections).
func yamlScalar(s string) (string, bool) {
	s = strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(s, `"`):
		v, err := strconv.Unquote(s[:strings.LastIndex(s, `"`)+1])
		return v, err == nil
	case strings.HasPrefix(s, "'"):
		end := strings.LastIndex(s, "'")
		if end == 0 {
			return "", false
		}
		return strings.ReplaceAll(s[1:end], "''", "'"), true
	case s == "" || strings.ContainsAny(s[:1], "|>[{&*!"):
		return "", false
	}
	if i := strings.Index(s, " #"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s, true
}
