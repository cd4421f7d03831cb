//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package worker

import (
	"errors"
	"os"
)

// Without flock no worker can tell a dead worker's record from a live
// one's: nothing is recorded, and a crash waits the sticky timeout.
func lockFile(*os.File) error { return errors.New("no file locks on this platform") }

func tryLockFile(*os.File) bool { return false }
