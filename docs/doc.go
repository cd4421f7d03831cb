// Package docs holds ctxflow's documentation, the Markdown pages beside this
// file, and what keeps it true: the configuration table generated from
// [config.Vars] (go generate ./docs/), and docs_test.go, which checks that
// every environment variable, route and make target the pages name exists,
// and that every one that exists is documented.
package docs

//go:generate go run ./gen
