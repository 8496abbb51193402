//go:build linux || darwin || freebsd

package s3

import (
	"sync"

	"golang.org/x/sys/unix"
)

// mapped holds the first byte of every mapped buffer: only those are
// handed back page by page (a Go-heap buffer's pages may hold others).
var mapped sync.Map

func allocBuf(n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil || n == 0 {
		return make([]byte, n)
	}
	mapped.Store(&b[0], true)
	return b
}

// releaseBuf hands b's pages back to the system; the mapping stays.
func releaseBuf(b []byte) {
	if _, ok := mapped.Load(&b[0]); ok {
		_ = unix.Madvise(b, unix.MADV_DONTNEED)
	}
}
