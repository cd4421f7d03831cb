package docs

import (
	"os"
	"testing"
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
