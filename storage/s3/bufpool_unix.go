//go:build linux || darwin || freebsd

package s3

import (
	"sync"
	"syscall"
)

// mapped holds the first byte of every mapped buffer: only those are
// handed back page by page (a Go-heap buffer's pages may hold others).
var mapped sync.Map

func allocBuf(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil || n == 0 {
		return make([]byte, n)
	}
	mapped.Store(&b[0], true)
	return b
}

// releaseBuf hands b's pages back to the system; the mapping stays.
func releaseBuf(b []byte) {
	if _, ok := mapped.Load(&b[0]); ok {
		_ = syscall.Madvise(b, syscall.MADV_DONTNEED)
	}
}
