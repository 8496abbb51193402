package faultproxy

import (
	"context"
	"net"

	"golang.org/x/time/rate"
)

// shapedListener hands out connections whose reads and writes are paced
// by Limits.ConnBytesPerSec.
type shapedListener struct {
	net.Listener
	p *Proxy
}

func (l *shapedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &shapedConn{Conn: c, p: l.p}, nil
}

// shapeBurst is the most one read or write moves before it waits: large
// enough that a late wake-up on a loaded machine is made up by the next
// read (the tokens accrue meanwhile), not lost.
const shapeBurst = 256 << 10

type shapedConn struct {
	net.Conn
	p        *Proxy
	rd, wr   *rate.Limiter
	rdR, wrR int64
}

// pace returns the limiter of one direction for the current rate (nil:
// no cap), remaking it when the rate changed.
func pace(lim **rate.Limiter, cur *int64, bps int64) *rate.Limiter {
	if bps <= 0 {
		*lim, *cur = nil, 0
		return nil
	}
	if *lim == nil || *cur != bps {
		*lim, *cur = rate.NewLimiter(rate.Limit(bps), shapeBurst), bps
	}
	return *lim
}

func (c *shapedConn) Read(b []byte) (int, error) {
	lim := pace(&c.rd, &c.rdR, c.p.connRate())
	if lim == nil {
		return c.Conn.Read(b)
	}
	if len(b) > shapeBurst {
		b = b[:shapeBurst]
	}
	n, err := c.Conn.Read(b)
	if n > 0 {
		_ = lim.WaitN(context.Background(), n)
	}
	return n, err
}

func (c *shapedConn) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		lim := pace(&c.wr, &c.wrR, c.p.connRate())
		if lim == nil {
			n, err := c.Conn.Write(b)
			return written + n, err
		}
		k := min(len(b), shapeBurst)
		_ = lim.WaitN(context.Background(), k)
		n, err := c.Conn.Write(b[:k])
		written += n
		if err != nil {
			return written, err
		}
		b = b[k:]
	}
	return written, nil
}
