package s3

import "sync"

// Part buffers (uploads) and range buffers (reads) are large, live for
// the whole transfer and are reused. They are kept outside the Go heap
// where the system allows it (anonymous memory maps): the garbage
// collector lets the heap grow to twice its live size by default, which
// would double their share of the process's memory. With them outside,
// a transfer adds its buffers to the resident size, no more.
//
// Buffers go back to a process-wide pool, their pages handed back to the
// system (they read as zeros until written again), and are never
// unmapped: a request that was given up on and still reads one can never
// fault.
var pool struct {
	sync.Mutex
	free map[int][][]byte
}

// getBuf returns a buffer of n bytes (length n; contents undefined).
func getBuf(n int) []byte {
	pool.Lock()
	if l := pool.free[n]; len(l) > 0 {
		b := l[len(l)-1]
		pool.free[n] = l[:len(l)-1]
		pool.Unlock()
		return b
	}
	pool.Unlock()
	return allocBuf(n)
}

// putBuf gives b (from getBuf) back; b must not be used after.
func putBuf(b []byte) {
	if cap(b) == 0 {
		return
	}
	b = b[:cap(b)]
	releaseBuf(b)
	pool.Lock()
	defer pool.Unlock()
	if pool.free == nil {
		pool.free = map[int][][]byte{}
	}
	pool.free[len(b)] = append(pool.free[len(b)], b)
}
