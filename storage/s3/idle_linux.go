//go:build linux

package s3

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// unsent is the number of bytes written to c that the peer has not
// acknowledged yet (SIOCOUTQ), or -1 when it cannot be told.
func unsent(c net.Conn) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	q := -1
	_ = rc.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ); err == nil {
			q = v
		}
	})
	return q
}
