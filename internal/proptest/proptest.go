// Package proptest holds what the property tests share: the number of
// checks rapid runs by default (and, in talk, generators of bilingual
// conversations).
package proptest

import (
	"flag"
	"os"
	"testing"
)

// Main runs a package's tests with 200 rapid checks a property unless
// -rapid.checks or RAPID_CHECKS says otherwise. A package's TestMain
// calls it.
func Main(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if _, env := os.LookupEnv("RAPID_CHECKS"); !set && !env {
		_ = flag.Set("rapid.checks", "200")
	}
	os.Exit(m.Run())
}
