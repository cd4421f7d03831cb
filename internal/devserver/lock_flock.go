//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package devserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// dirLock is an exclusive lock on a data dir, so that two servers never share
// one SQLite database. The kernel drops it when the process dies.
type dirLock struct {
	f *os.File
}

func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %s is in use by another temporal dev server", dir)
		}
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) release() error {
	return l.f.Close() // closing the file drops the lock
}
