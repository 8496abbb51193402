package archive

import (
	"errors"
	"fmt"
	"io"
)

// errAheadClosed is what an aheadReader returns once closed.
var errAheadClosed = errors.New("archive: read of a closed group reader")

// aheadPool is what the aheadReaders of one Index share: slots bounds
// their ReadAt calls in flight (ReaderOptions.ReadAhead), spare holds
// the buffers of the chunks they hold ahead, size bytes each: at most
// cap(spare), made when first needed and reused.
type aheadPool struct {
	slots chan struct{}
	spare chan []byte // nil entries: buffers not made yet
	size  int64
}

// newAheadPool returns the pool of n ranged reads of size bytes; nil
// when n <= 0 (no read-ahead).
func newAheadPool(n int, size int64) *aheadPool {
	if n <= 0 {
		return nil
	}
	p := &aheadPool{slots: make(chan struct{}, n), spare: make(chan []byte, n), size: size}
	for range n {
		p.spare <- nil
	}
	return p
}

// buffer takes a spare buffer, without waiting; false: none is left.
func (p *aheadPool) buffer() ([]byte, bool) {
	select {
	case b := <-p.spare:
		if b == nil {
			b = make([]byte, p.size)
		}
		return b, true
	default:
		return nil, false
	}
}

// aheadReader reads the span [off, end) of an io.ReaderAt in order, in
// chunks of one size fetched ahead of the caller by goroutines, each one
// ReadAt call (one ranged GET on S3). The calls in flight of all the
// readers of one aheadPool are at most cap(pool.slots); each reader
// keeps at most window chunks fetched or being fetched ahead of the one
// it is delivering.
//
// Memory: a reader has one buffer of its own (for the chunk it delivers,
// or the next one it waits for); every further chunk takes a buffer of
// the pool, without waiting: with none left the reader fetches no
// further ahead for now. So no reader waits for a buffer another holds
// (one stopped by its caller holds at most what it took), and the pool's
// buffers go to whichever reader asks first. Close stops the fetches not
// yet started, waits for those in flight and gives the buffers back.
//
// A chunk whose ReadAt failed ends the stream with that error (wrapped)
// once the chunks before it, and the bytes it did read, are delivered.
// Not safe for concurrent use.
type aheadReader struct {
	ra        io.ReaderAt
	next, end int64 // offset of the next chunk to start; end of the span
	chunk     int64
	window    int
	pool      *aheadPool
	quit      chan struct{} // closed by Close: fetches waiting for a slot give up

	own    []byte        // the reader's own buffer (nil until first used)
	ownOut bool          // own is in use (queued or being delivered)
	queue  []*aheadChunk // fetches started, in order
	cur    *aheadChunk   // the chunk being delivered
	rest   []byte        // what is left of it
	err    error         // sticky: the stream's end, or a failed chunk's error
	closed bool
}

type aheadChunk struct {
	done   chan struct{}
	buf    []byte // the chunk's bytes: buf[:n] were read
	n      int
	err    error
	pooled bool // buf is the pool's, not the reader's own
}

// newAheadReader reads [off, off+size) of ra in chunks of chunk bytes
// (at most pool.size), at most window ahead. Nothing is read before the
// first Read.
func newAheadReader(ra io.ReaderAt, off, size, chunk int64, window int, pool *aheadPool) *aheadReader {
	return &aheadReader{ra: ra, next: off, end: off + size, chunk: max(1, min(chunk, pool.size)), window: max(window, 1),
		pool: pool, quit: make(chan struct{})}
}

func (a *aheadReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for len(a.rest) == 0 {
		if a.cur != nil {
			a.drop(a.cur)
			a.cur = nil
		}
		if a.err != nil {
			return 0, a.err
		}
		a.fill()
		if len(a.queue) == 0 {
			a.err = io.EOF
			return 0, a.err
		}
		c := a.queue[0]
		<-c.done // a fetch always ends: ReadAt returns, or Close stops it
		a.queue = a.queue[1:]
		a.cur, a.rest = c, c.buf[:c.n]
		if c.err != nil {
			// the bytes read before the failure first, then the error;
			// nothing after it
			a.err, a.next = c.err, a.end
		}
		a.fill()
	}
	n := copy(p, a.rest)
	a.rest = a.rest[n:]
	return n, nil
}

// drop gives back c's buffer.
func (a *aheadReader) drop(c *aheadChunk) {
	if c.pooled {
		a.pool.spare <- c.buf[:cap(c.buf)] // never blocks: it came from there
	} else {
		a.ownOut = false
	}
}

// fill starts fetches until window chunks are ahead, the whole span is
// started, or no buffer is left for one more.
func (a *aheadReader) fill() {
	for len(a.queue) < a.window && a.next < a.end && !a.closed {
		n := min(a.chunk, a.end-a.next)
		c := &aheadChunk{done: make(chan struct{})}
		if !a.ownOut {
			if a.own == nil {
				a.own = make([]byte, a.chunk)
			}
			a.ownOut, c.buf = true, a.own[:n]
		} else if b, ok := a.pool.buffer(); ok {
			c.pooled, c.buf = true, b[:n]
		} else {
			return
		}
		go a.fetch(c, a.next)
		a.queue = append(a.queue, c)
		a.next += n
	}
}

// fetch fills c from off once a slot is free.
func (a *aheadReader) fetch(c *aheadChunk, off int64) {
	defer close(c.done)
	select {
	case a.pool.slots <- struct{}{}:
	case <-a.quit:
		c.err = errAheadClosed
		return
	}
	c.n, c.err = a.ra.ReadAt(c.buf, off)
	<-a.pool.slots
	switch {
	case c.n == len(c.buf):
		c.err = nil // io.EOF with the whole chunk read: the span ends here
	case errors.Is(c.err, io.EOF):
		// the archive ends inside the span (truncated): so does the stream
	case c.err == nil:
		c.err = fmt.Errorf("archive: read at offset %d: %w", off+int64(c.n), io.ErrUnexpectedEOF)
	default:
		c.err = fmt.Errorf("archive: read at offset %d: %w", off+int64(c.n), c.err)
	}
}

// Close stops the fetches waiting for a slot, waits for those in flight
// and gives every buffer back. Reads after Close fail.
func (a *aheadReader) Close() error {
	if a.closed {
		return nil
	}
	a.closed = true
	close(a.quit)
	if a.cur != nil {
		a.drop(a.cur)
		a.cur, a.rest = nil, nil
	}
	for _, c := range a.queue {
		<-c.done
		a.drop(c)
	}
	a.queue, a.own = nil, nil
	a.err = errAheadClosed
	return nil
}
