//go:build unix

package storage

import (
	"errors"
	"os"
	"syscall"
)

// canLockTemps says lockTemp really locks, so leftovers of killed
// writers can be told from the temporary files of running ones.
const canLockTemps = true

// lockTemp takes an exclusive, non-blocking flock on f, held until f is
// closed (or the process dies: the kernel drops it then). It returns
// errTempBusy when another open file description holds the lock.
func lockTemp(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errTempBusy
		default:
			return err
		}
	}
}
