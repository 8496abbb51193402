package archive

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"
)

// allocated returns the bytes fn allocated.
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// readAllLimited reads a member of a declared size into one buffer of
// that size (it grew by doubling: two to three times the member's size
// allocated, the reader's peak memory with it), and a header claiming
// more than the stream holds costs what arrived, up to trustedSize.
func TestReadAllLimited_OneBuffer(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 4<<20)
	var got []byte
	var err error
	n := allocated(func() { got, err = readAllLimited(bytes.NewReader(data), int64(len(data))) })
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	if n > uint64(len(data))*11/10 {
		t.Errorf("allocated %d bytes to read %d", n, len(data))
	}
	// cut short: an error, never a short member
	if _, err := readAllLimited(bytes.NewReader(data[:100]), int64(len(data))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short stream: %v, want ErrUnexpectedEOF", err)
	}
	if _, err := readAllLimited(bytes.NewReader(nil), 10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("empty stream: %v, want ErrUnexpectedEOF", err)
	}
	// a claim of 1 GiB over 10 bytes
	n = allocated(func() { _, err = readAllLimited(bytes.NewReader(data[:10]), 1<<30) })
	if !errors.Is(err, io.ErrUnexpectedEOF) || n > trustedSize*3/2 {
		t.Errorf("1 GiB claimed, 10 bytes sent: %v, %d bytes allocated", err, n)
	}
	// beyond trustedSize: read whole, grown as it arrives
	big := make([]byte, trustedSize+10)
	for i := range big {
		big[i] = byte(i)
	}
	got, err = readAllLimited(io.MultiReader(bytes.NewReader(big[:1000]), bytes.NewReader(big[1000:])), int64(len(big)))
	if err != nil || !bytes.Equal(got, big) {
		t.Errorf("a member of %d bytes: %d read, %v", len(big), len(got), err)
	}
	if _, err := readAllLimited(bytes.NewReader(big[:trustedSize+5]), int64(len(big))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a member of %d bytes cut 5 short: %v", len(big), err)
	}
}
