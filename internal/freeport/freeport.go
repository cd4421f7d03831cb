// Package freeport finds a free TCP port for a server a process is about
// to start (the embedded Temporal server, a test's Ollama), where ":0"
// cannot be used because the port must be named before the bind.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

var (
	handedMu sync.Mutex
	handed   = map[int]bool{} // the ports Port returned
)

// Port finds a free TCP port on ip below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range). A port the kernel hands out for ":0"
// is in that range, and so is every outgoing connection's source port: one
// of them took such a port between this check and the server's bind, and
// the Temporal server does not survive a failed bind (it panics). Nor does
// it return a port it returned before in this process: a port is free again
// once checked, so the five of one server could have come out the same.
func Port(ip string) (int, error) {
	low := 32768
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(data)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 11000 {
				low = n
			}
		}
	}
	handedMu.Lock()
	defer handedMu.Unlock()
	var err error
	for range 100 {
		port := 10000 + rand.IntN(low-10000)
		if handed[port] {
			continue
		}
		var ln net.Listener
		if ln, err = net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port))); err == nil {
			_ = ln.Close()
			handed[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("find a free port on %s below %d: %w", ip, low, err)
}
