package s3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sofadb/sofa/internal/s3test"
	"github.com/sofadb/sofa/storage"
	"github.com/sofadb/sofa/storage/s3"
	"github.com/sofadb/sofa/storage/storagetest"
)

// newStore is a store on endpoint (the server, or a proxy in front of
// it) with the root credentials.
func newStore(t testing.TB, endpoint string, o s3.Options) *s3.Store {
	t.Helper()
	o.Endpoint, o.PathStyle, o.Region, o.Credentials = endpoint, true, s3test.Region, s3test.Credentials()
	st, err := s3.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestConformance(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t)
	storagetest.Run(t, func(t *testing.T) storage.Store {
		return newStore(t, srv.URL, s3.Options{PartSize: s3.MinPartSize})
	}, func(t *testing.T, short string) string {
		return "s3://" + bucket + "/" + t.Name() + "/" + short
	})
}

// pattern is n bytes that differ at every offset modulo a large prime,
// so a part out of place or a range off by one shows.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// writeStream writes data in odd-sized pieces, as the archive writer
// does.
func writeStream(t testing.TB, w storage.Writer, data []byte) {
	t.Helper()
	for len(data) > 0 {
		k := min(len(data), 100_003)
		if _, err := w.Write(data[:k]); err != nil {
			t.Fatalf("Write: %v", err)
		}
		data = data[k:]
	}
}

// TestMultipartRoundTrip: a stream of several parts (the last short) is
// completed, checked and read back whole, in order and at offsets.
func TestMultipartRoundTrip(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t)
	st := newStore(t, srv.URL, s3.Options{PartSize: s3.MinPartSize, Transfers: 3})
	ctx := context.Background()
	name := "s3://" + bucket + "/dir/multi.sofa"
	data := pattern(4*s3.MinPartSize + 12345)
	w, err := st.Create(ctx, name, storage.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeStream(t, w, data)
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if s := s3.WriterStats(w); s.Parts != 5 {
		t.Fatalf("sent %d parts, want 5", s.Parts)
	}
	// Commit compared this ETag (MD5 of the parts' MD5s, "-5") with
	// the parts it sent: the server gives one of that form
	bucketKey := strings.TrimPrefix(name, "s3://")
	b, k, _ := strings.Cut(bucketKey, "/")
	h, err := st.Client().HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &b, Key: &k})
	if err != nil || !regexp.MustCompile(`^"?[0-9a-f]{32}-5"?$`).MatchString(aws.ToString(h.ETag)) {
		t.Fatalf("ETag %q (%v): not a multipart MD5 ETag, Commit's check did not run", aws.ToString(h.ETag), err)
	}
	r, err := st.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Size() != int64(len(data)) {
		t.Fatalf("Size = %d, want %d", r.Size(), len(data))
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes (%v), equal %v", len(got), err, bytes.Equal(got, data))
	}
	// a range across a part boundary
	buf := make([]byte, 1000)
	off := int64(s3.MinPartSize - 500)
	if _, err := r.ReadAt(buf, off); err != nil || !bytes.Equal(buf, data[off:off+1000]) {
		t.Fatalf("ReadAt across parts: %v", err)
	}
	// a range past the end is short, with io.EOF
	n, err := r.ReadAt(buf, int64(len(data))-10)
	if n != 10 || err != io.EOF {
		t.Fatalf("ReadAt at the end = %d, %v", n, err)
	}
}

// TestAbortLeavesNoUpload: Abort after parts were sent aborts the
// multipart upload: no object, no upload in progress.
func TestAbortLeavesNoUpload(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t)
	st := newStore(t, srv.URL, s3.Options{PartSize: s3.MinPartSize})
	ctx := context.Background()
	name := "s3://" + bucket + "/aborted.sofa"
	w, err := st.Create(ctx, name, storage.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeStream(t, w, pattern(3*s3.MinPartSize))
	if len(s3test.Uploads(t, srv.URL, bucket)) != 1 {
		t.Fatal("no multipart upload in progress after 3 parts")
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if u := s3test.Uploads(t, srv.URL, bucket); len(u) != 0 {
		t.Fatalf("uploads left after Abort: %v", u)
	}
	if _, err := st.Stat(ctx, name); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("Stat after Abort: %v", err)
	}
}

// TestUploadMemoryBound: a stream of many parts holds at most
// Transfers+1 part buffers, and the process's resident size (the buffers
// live outside the Go heap) and its heap stay within that bound plus a
// fixed overhead while it is sent.
func TestUploadMemoryBound(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t)
	const transfers, parts = 2, 24
	st := newStore(t, srv.URL, s3.Options{PartSize: s3.MinPartSize, Transfers: transfers})
	ctx := context.Background()
	w, err := st.Create(ctx, "s3://"+bucket+"/big.sofa", storage.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	piece := pattern(1 << 20)
	rssBase := rss(t)
	var peak, rssPeak uint64
	for i := range parts * s3.MinPartSize / len(piece) {
		if _, err := w.Write(piece); err != nil {
			t.Fatal(err)
		}
		if i%4 == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			rssPeak = max(rssPeak, rss(t))
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	s := s3.WriterStats(w)
	bound := int64(s3.MinPartSize) * (transfers + 1)
	t.Logf("%d parts, %d buffers (%d MiB), heap peak %d MiB and resident peak %d MiB over the start (bound %d MiB + overhead)",
		s.Parts, s.Buffers, s.BufferBytes>>20, (peak-base)>>20, (rssPeak-rssBase)>>20, bound>>20)
	if s.Parts != parts || s.Buffers > transfers+1 || s.BufferBytes > bound {
		t.Fatalf("stats %+v: want %d parts in at most %d buffers", s, parts, transfers+1)
	}
	// garbage between two collections may double the live bytes; the
	// stream itself is 8 times the bound
	limit := uint64(bound + 16<<20)
	if peak-base > limit {
		t.Fatalf("heap grew by %d MiB, over %d MiB", (peak-base)>>20, limit>>20)
	}
	if rssPeak > rssBase && rssPeak-rssBase > limit {
		t.Fatalf("resident size grew by %d MiB, over %d MiB", (rssPeak-rssBase)>>20, limit>>20)
	}
}

// rss is the process's resident size in bytes (0 where /proc is
// missing).
func rss(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}
