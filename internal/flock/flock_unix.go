//go:build unix

package flock

import (
	"errors"
	"os"
	"syscall"
)

// Supported says TryLock really locks, so a file left by a killed
// process can be told from one a running process holds.
const Supported = true

// TryLock takes an exclusive, non-blocking flock on f, held until f is
// closed (or the process dies: the kernel drops it then). It returns
// ErrBusy when another open file description holds the lock.
func TryLock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return ErrBusy
		default:
			return err
		}
	}
}
