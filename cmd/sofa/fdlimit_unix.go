//go:build unix

package main

import "syscall"

// openFileLimit is the soft RLIMIT_NOFILE (Go raises it to the hard
// limit at start-up), false when it cannot be read or is unlimited.
func openFileLimit() (uint64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur == ^uint64(0) {
		return 0, false
	}
	return r.Cur, true
}
