package config

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/workflows"
)

// TestValuesAreWhatLoadAccepts: the values documented for an integer
// setting ("A to B", "at least A") are the ones load accepts, at the edges
// and one past them.
func TestValuesAreWhatLoadAccepts(t *testing.T) {
	checked := 0
	for _, v := range Vars {
		lo, hi, ok := intRange(v.Values)
		if !ok {
			continue
		}
		checked++
		good := []int64{lo}
		if hi != 0 {
			good = append(good, hi)
		}
		for _, n := range good {
			if _, err := load(env(map[string]string{v.Name: strconv.FormatInt(n, 10)})); err != nil {
				t.Errorf("%s=%d (values %q): %v", v.Name, n, v.Values, err)
			}
		}
		bad := []int64{lo - 1}
		if hi != 0 {
			bad = append(bad, hi+1)
		}
		for _, n := range bad {
			if n == 0 && strings.HasPrefix(v.Values, "0 ") {
				continue
			}
			if _, err := load(env(map[string]string{v.Name: strconv.FormatInt(n, 10)})); err == nil || !strings.Contains(err.Error(), v.Name) {
				t.Errorf("%s=%d (values %q): error %v", v.Name, n, v.Values, err)
			}
		}
	}
	if checked < 12 {
		t.Errorf("only %d settings have integer ranges", checked)
	}
}

// intRange reads "A to B", "at least A" and "0 (…) or A to B".
func intRange(values string) (lo, hi int64, ok bool) {
	if _, rest, zero := strings.Cut(values, ") or "); zero {
		values = rest
	}
	if rest, ok := strings.CutPrefix(values, "at least "); ok {
		n, err := strconv.ParseInt(rest, 10, 64)
		return n, 0, err == nil
	}
	a, b, ok := strings.Cut(values, " to ")
	lo, err1 := strconv.ParseInt(a, 10, 64)
	hi, err2 := strconv.ParseInt(b, 10, 64)
	return lo, hi, ok && err1 == nil && err2 == nil
}

// TestLimitsAreWorkflows: the defaults and ranges of the limits are
// workflows' own, not copies.
func TestLimitsAreWorkflows(t *testing.T) {
	want := map[string]string{
		"LLM_MAX_TOKENS":             strconv.Itoa(workflows.DefaultLimits().LLMMaxTokens),
		"CTXFLOW_MAX_QUESTION_BYTES": strconv.Itoa(workflows.DefaultMaxQuestionBytes),
		"CTXFLOW_RECENT_TURNS":       strconv.Itoa(workflows.DefaultLimits().RecentTurns),
		"LLM_TIMEOUT":                "60s",
		"CTXFLOW_SESSION_IDLE_TTL":   "24h",
		"CTXFLOW_FAST_MODEL":         "500ms",
	}
	values := map[string]string{
		"CTXFLOW_MAX_QUESTION_BYTES": strconv.FormatInt(workflows.MaxQuestionBytesRange.Min, 10) + " to " + strconv.FormatInt(workflows.MaxQuestionBytesRange.Max, 10),
		"LLM_TIMEOUT":                "at least 1s",
		"CTXFLOW_FAST_MODEL":         "0 to 10s",
	}
	for _, v := range Vars {
		if d, ok := want[v.Name]; ok && v.Default != d {
			t.Errorf("%s: default %q, want %q", v.Name, v.Default, d)
		}
		if r, ok := values[v.Name]; ok && v.Values != r {
			t.Errorf("%s: values %q, want %q", v.Name, v.Values, r)
		}
	}
}

// TestCheck: one value alone, as deploy/deploylint checks the values
// deploy/ sets.
func TestCheck(t *testing.T) {
	for _, v := range Vars {
		if v.Default != "unset" {
			if err := Check(v.Name, v.Default); err != nil {
				t.Errorf("Check(%s, its default %q): %v", v.Name, v.Default, err)
			}
		}
	}
	for _, tc := range []struct{ name, value, want string }{
		{"CTXFLOW_OLLAMA_NUM_CTX", "7", "CTXFLOW_OLLAMA_NUM_CTX 7: want 512 to 2097152"},
		{"CTXFLOW_LOG_FORMAT", "xml", `CTXFLOW_LOG_FORMAT "xml": want text or json`},
		{"LLM_MAX_TOKENS", "0", "LLM_MAX_TOKENS: LLM max tokens 0 out of range [1, 1000000]"},
		{"CTXFLOW_MCP_TIMEOUT", "soon", "not a duration"},
		{"CTXFLOW_TOKEN_SECRET", "short", "want at least 16"},
	} {
		if err := Check(tc.name, tc.value); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%s, %q) = %v, want %q", tc.name, tc.value, err, tc.want)
		}
	}
	// Rules that tie variables together are load's; names ctxflow does
	// not read itself, and blank values, are not checked.
	for _, tc := range [][2]string{{"CTXFLOW_TRANSCRIPT_STORE", "postgres"}, {"TEMPORAL_TLS_CERT", "x"}, {"CTXFLOW_UI_PORT", " "}} {
		if err := Check(tc[0], tc[1]); err != nil {
			t.Errorf("Check(%s, %q): %v", tc[0], tc[1], err)
		}
	}
}
