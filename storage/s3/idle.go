package s3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// DefaultIdleTimeout is how long a connection may move no byte, either
// way, before the request on it fails (and is retried): 2 min.
const DefaultIdleTimeout = 2 * time.Minute

// idleDial wraps dial so that each connection fails once no byte moved
// on it for d.
//
// The SDK's own read timeout (WithReadTimeout, which exempts S3) counts
// reads only: a part still being sent on a slow link receives nothing
// until the server answers, and would fail while it progresses. Here a
// byte written counts as much as a byte read.
func idleDial(dial func(ctx context.Context, network, addr string) (net.Conn, error), d time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		ic := &idleConn{Conn: c, d: d}
		ic.moved()
		return ic, nil
	}
}

// idleConn is a net.Conn whose reads and writes fail with an *IdleError
// once no byte moved on it, either way, for d.
type idleConn struct {
	net.Conn
	d    time.Duration
	last atomic.Int64 // when a byte last moved, Unix nanoseconds

	queued int // unsent bytes at Read's last timeout (Read's own)
}

func (c *idleConn) moved() { c.last.Store(time.Now().UnixNano()) }

func (c *idleConn) lastMoved() time.Time { return time.Unix(0, c.last.Load()) }

// Read waits until d after the last byte moved: a write meanwhile (a
// part being sent), or written bytes the peer acknowledged meanwhile
// (checked each time the wait runs out), extend it. A connection whose
// unacknowledged bytes stay put fails after d to 2d.
func (c *idleConn) Read(p []byte) (int, error) {
	for {
		if err := c.Conn.SetReadDeadline(c.lastMoved().Add(c.d)); err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(p)
		if n > 0 {
			c.moved()
		}
		if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
			// what was written may still be on its way: the kernel
			// buffers megabytes, which a slow link takes long to send
			if q := unsent(c.Conn); q >= 0 && q != c.queued {
				c.queued = q
				c.moved()
			}
			if time.Since(c.lastMoved()) < c.d {
				continue
			}
			return 0, &IdleError{After: c.d}
		}
		return n, err
	}
}

// idleWriteChunk is the most one write to the connection sends: each
// chunk sent marks the connection alive for Read (one Write of a whole
// part would only return, and mark it, at the end).
const idleWriteChunk = 64 << 10

// Write sends p in chunks, each given d to make progress.
func (c *idleConn) Write(p []byte) (int, error) {
	written := 0
	for written < len(p) {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.d)); err != nil {
			return written, err
		}
		n, err := c.Conn.Write(p[written:min(len(p), written+idleWriteChunk)])
		written += n
		if n > 0 {
			c.moved()
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if n > 0 {
				continue // it moved: a fresh deadline for the rest
			}
			return written, &IdleError{After: c.d}
		}
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// IdleError is the error of a request whose connection moved no byte for
// After (Options.IdleTimeout). It is a net.Error timeout: the SDK's
// retryer and the reader retry the request.
type IdleError struct {
	After time.Duration
}

func (e *IdleError) Error() string {
	return fmt.Sprintf("s3: the connection moved no data for %s", e.After)
}

// Timeout is true (net.Error).
func (e *IdleError) Timeout() bool { return true }

// Temporary is true (net.Error).
func (e *IdleError) Temporary() bool { return true }

var _ net.Error = (*IdleError)(nil)
