//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package worker

import (
	"os"
	"syscall"
)

// lockFile takes f's exclusive lock, which the kernel drops when the
// process dies, however it dies.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

// tryLockFile reports whether f's exclusive lock was free (and is now
// held through f).
func tryLockFile(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}
