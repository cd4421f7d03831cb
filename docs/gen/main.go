// Command gen writes the table of environment variables into
// configuration.md from config.Vars: run it with go generate ./docs/.
package main

import (
	"fmt"
	"os"

	"github.com/ctxflow/ctxflow/docs"
)

func main() {
	const page = "configuration.md" // go generate runs in docs/
	b, err := os.ReadFile(page)
	if err == nil {
		var out string
		if out, err = docs.WithConfigTable(string(b)); err == nil {
			err = os.WriteFile(page, []byte(out), 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "docs/gen:", err)
		os.Exit(1)
	}
}
