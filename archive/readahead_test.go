package archive

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
)

// gatedReaderAt serves data; each ReadAt announces itself on started
// (when set) and, while gate is open (non-nil, not closed), waits for
// it. It counts the calls in flight and the most seen at once.
type gatedReaderAt struct {
	data    []byte
	started chan int64 // offsets of calls as they start
	gate    chan struct{}
	calls   atomic.Int64
	in, max atomic.Int64
}

func (g *gatedReaderAt) ReadAt(p []byte, off int64) (int, error) {
	g.calls.Add(1)
	n := g.in.Add(1)
	defer g.in.Add(-1)
	for m := g.max.Load(); n > m && !g.max.CompareAndSwap(m, n); m = g.max.Load() {
	}
	if g.started != nil {
		g.started <- off
	}
	if g.gate != nil {
		<-g.gate
	}
	return bytes.NewReader(g.data).ReadAt(p, off)
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// TestIndexReadAheadInOrder: readers of spans that are not whole chunks,
// read one byte at a time or all at once, deliver their span's bytes in
// order, and every pool buffer is back once they are closed.
func TestIndexReadAheadInOrder(t *testing.T) {
	data := pattern(10_000)
	for _, c := range []struct {
		off, size, chunk int64
		window, slots    int
	}{
		{0, 10_000, 1000, 4, 4},
		{13, 9_000, 777, 3, 2},
		{500, 100, 4096, 8, 8}, // one short chunk
		{9_999, 1, 16, 1, 1},
		{42, 0, 16, 2, 2}, // empty span
	} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			pool := newAheadPool(c.slots, 4096)
			ra := &gatedReaderAt{data: data}
			want := data[c.off : c.off+c.size]
			for _, oneByte := range []bool{false, true} {
				a := newAheadReader(ra, c.off, c.size, c.chunk, c.window, pool)
				var r io.Reader = a
				if oneByte {
					r = iotest.OneByteReader(a)
				}
				got, err := io.ReadAll(r)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("got %d bytes, want %d (equal prefix: %d)", len(got), len(want), commonPrefix(got, want))
				}
				a.Close()
				if _, err := a.Read(make([]byte, 1)); !errors.Is(err, errAheadClosed) {
					t.Errorf("Read after Close: %v", err)
				}
			}
			if len(pool.spare) != cap(pool.spare) {
				t.Errorf("%d of %d pool buffers back", len(pool.spare), cap(pool.spare))
			}
		})
	}
}

func commonPrefix(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// TestIndexReadAheadBound: the ReadAt calls in flight of all the readers of
// one pool never pass its slots, and reach them when there is work: one
// reader alone fills them all, four readers together fill them and
// share them. Each call is held until the test lets it go, so what is
// in flight at once is seen, not raced.
func TestIndexReadAheadBound(t *testing.T) {
	const slots, chunk = 4, 100
	for _, readers := range []int{1, 4} {
		t.Run(fmt.Sprint(readers, " readers"), func(t *testing.T) {
			data := pattern(readers * 20 * chunk)
			ra := &gatedReaderAt{data: data, started: make(chan int64, 1000), gate: make(chan struct{})}
			pool := newAheadPool(slots, chunk)
			span := int64(len(data) / readers)
			var wg sync.WaitGroup
			errs := make([]error, readers)
			for i := range readers {
				a := newAheadReader(ra, int64(i)*span, span, chunk, slots, pool)
				wg.Go(func() {
					defer a.Close()
					got, err := io.ReadAll(a)
					if err == nil && !bytes.Equal(got, data[int64(i)*span:int64(i+1)*span]) {
						err = fmt.Errorf("reader %d: wrong bytes", i)
					}
					errs[i] = err
				})
			}
			// the bound reached: slots calls started and held
			for range slots {
				<-ra.started
			}
			if n := ra.in.Load(); n != slots {
				t.Errorf("%d ReadAt calls in flight, want %d", n, slots)
			}
			// let them go one at a time until every reader is done
			done := make(chan struct{})
			go func() {
				wg.Wait()
				close(done)
			}()
		release:
			for {
				select {
				case ra.gate <- struct{}{}:
				case <-done:
					break release
				}
			}
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if m := ra.max.Load(); m != slots {
				t.Errorf("at most %d ReadAt calls in flight, want %d", m, slots)
			}
			if n := ra.calls.Load(); n != int64(len(data)/chunk) {
				t.Errorf("%d ReadAt calls, want one per chunk: %d", n, len(data)/chunk)
			}
			if len(pool.spare) != cap(pool.spare) {
				t.Errorf("%d of %d pool buffers back", len(pool.spare), cap(pool.spare))
			}
		})
	}
}

// TestIndexReadAheadEarlyClose: a reader closed early starts no more
// ReadAt calls: one whose fetch waits for a slot (all held by another
// reader) returns from Close at once; one with fetches in flight waits
// for them. Both give their buffers back.
func TestIndexReadAheadEarlyClose(t *testing.T) {
	const slots, chunk = 2, 100
	data := pattern(50 * chunk)
	ra := &gatedReaderAt{data: data, started: make(chan int64, 100), gate: make(chan struct{})}
	pool := newAheadPool(slots, chunk)
	b := newAheadReader(ra, 0, int64(len(data)), chunk, 4, pool)
	b.fill() // its own chunk and the pool's two: two in flight, one waits
	<-ra.started
	<-ra.started
	a := newAheadReader(ra, 0, int64(len(data)), chunk, 4, pool)
	a.fill() // its own chunk, waiting for a slot
	a.Close()
	if n := ra.calls.Load(); n != slots {
		t.Errorf("%d ReadAt calls, want only the %d of the other reader", n, slots)
	}
	if _, err := a.Read(make([]byte, 1)); !errors.Is(err, errAheadClosed) {
		t.Errorf("Read after Close: %v", err)
	}

	read := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(b, make([]byte, chunk/2))
		read <- err
	}()
	for wait := true; wait; {
		select {
		case ra.gate <- struct{}{}:
		case err := <-read:
			if err != nil {
				t.Fatal(err)
			}
			wait = false
		}
	}
	closed := make(chan struct{})
	go func() {
		b.Close()
		close(closed)
	}()
	close(ra.gate) // the calls in flight end
	<-closed
	// the three it had started: none of the 47 chunks after them
	if n := ra.calls.Load(); n > 3 {
		t.Errorf("%d ReadAt calls after an early Close, want at most 3", n)
	}
	if len(pool.spare) != cap(pool.spare) {
		t.Errorf("%d of %d pool buffers back", len(pool.spare), cap(pool.spare))
	}
}

// failAt fails the ReadAt whose range holds offset bad after reading the
// bytes before it, at once; the calls of earlier ranges wait until it
// has failed, so the error is known before the bytes ahead of it.
type failAt struct {
	data   []byte
	bad    int64
	failed chan struct{}
	once   sync.Once
}

var errDisk = errors.New("disk on fire")

func (f *failAt) ReadAt(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	switch {
	case off <= f.bad && f.bad < end:
		n := copy(p, f.data[off:f.bad])
		f.once.Do(func() { close(f.failed) })
		return n, errDisk
	case end <= f.bad:
		<-f.failed
	}
	return bytes.NewReader(f.data).ReadAt(p, off)
}

// TestIndexReadAheadErrorAtOffset: a failed ReadAt ends the stream at the
// byte where it failed, with its error (wrapped, naming the offset),
// after every byte before it, even when it failed before the chunks
// ahead of it were read.
func TestIndexReadAheadErrorAtOffset(t *testing.T) {
	data := pattern(5_000)
	const off, bad = 300, 2_345
	f := &failAt{data: data, bad: bad, failed: make(chan struct{})}
	pool := newAheadPool(8, 500)
	a := newAheadReader(f, off, 4_000, 500, 8, pool)
	defer a.Close()
	got, err := io.ReadAll(a)
	if !errors.Is(err, errDisk) {
		t.Fatalf("error %v, want %v", err, errDisk)
	}
	if !strings.Contains(err.Error(), fmt.Sprint("offset ", bad)) {
		t.Errorf("error %q does not name offset %d", err, bad)
	}
	if !bytes.Equal(got, data[off:bad]) {
		t.Errorf("%d bytes before the error, want %d (equal prefix %d)", len(got), bad-off, commonPrefix(got, data[off:bad]))
	}
	if _, err2 := a.Read(make([]byte, 1)); !errors.Is(err2, errDisk) {
		t.Errorf("Read after the error: %v", err2)
	}
}

// TestIndexReadAheadTruncated: a span past the end of the io.ReaderAt ends
// with io.EOF where the data ends (the tar reader then names the
// truncated member), as a plain section reader does.
func TestIndexReadAheadTruncated(t *testing.T) {
	data := pattern(1_000)
	a := newAheadReader(&gatedReaderAt{data: data}, 100, 5_000, 256, 4, newAheadPool(4, 256))
	defer a.Close()
	got, err := io.ReadAll(a)
	if err != nil || !bytes.Equal(got, data[100:]) {
		t.Errorf("got %d bytes, %v; want %d, nil", len(got), err, len(data)-100)
	}
}
