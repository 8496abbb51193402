//go:build unix

package couchtest

import "syscall"

// procAttr puts the server in its own process group so that Stop can kill
// node and anything it spawned. On Linux the server also gets SIGKILL when
// the test process dies (for example on a -timeout panic, when Cleanup
// does not run); strictly the signal follows the OS thread that started it,
// which the Go runtime keeps alive unless a goroutine locked to it exits.
func procAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(a)
	return a
}

func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}
