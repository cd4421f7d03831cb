//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package devserver

// dirLock is a no-op where flock is unavailable.
type dirLock struct{}

func lockDir(string) (*dirLock, error) { return &dirLock{}, nil }

func (*dirLock) release() error { return nil }
