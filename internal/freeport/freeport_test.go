package freeport

import "testing"

// Port never hands out one port twice in a process: a checked port is
// free again, and five picked for one server could have come out the same
// (at 2,000 picks a repeat is all but certain without this).
func TestPortNeverTheSameTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 2000 {
		port, err := Port("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
	}
}
