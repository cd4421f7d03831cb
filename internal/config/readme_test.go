package config

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestReadmeDocumentsEveryVariable keeps the README's configuration table
// true: every variable with its default, and no variable the code lacks.
func TestReadmeDocumentsEveryVariable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	documented := map[string]bool{}
	for _, v := range Vars {
		row := fmt.Sprintf("| `%s` | `%s` |", v.Name, v.Default)
		if !strings.Contains(readme, row) {
			t.Errorf("README.md has no row starting %s", row)
		}
		documented[v.Name] = true
	}
	for _, line := range strings.Split(readme, "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			name, _, _ = strings.Cut(name, "`")
			if isEnvName(name) && !documented[name] {
				t.Errorf("README.md documents %s, which the code does not read", name)
			}
		}
	}
}

func isEnvName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}
