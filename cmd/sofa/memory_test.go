package main

import (
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// TestPeakRSSBoundedByBudget copies documents with large attachments under
// a small --max-inflight-bytes and checks the peak RSS of the sofa process
// stays under the budget plus the documented overhead: workers × 3 ×
// --write-batch-bytes (a buffered batch, its base64 request body and the
// answer) plus a fixed 48 MiB for the runtime and HTTP buffers.
func TestPeakRSSBoundedByBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 64 MB")
	}
	srv := couchtest.Start(t)
	c := srv.Client()
	src, tgt := "mem-src", "mem-tgt"
	if err := c.CreateDB(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	const docs, attSize = 16, 4 << 20
	for i := 0; i < docs; i++ {
		id := fmt.Sprintf("big-%02d", i)
		rev, err := c.PutDoc(t.Context(), src, id, map[string]any{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, attSize)
		rand.Read(data)
		if _, err := c.PutAttachment(t.Context(), src, id, rev, "blob.bin", "application/octet-stream", data); err != nil {
			t.Fatal(err)
		}
	}
	bin := sofaBin(t)
	const budget, writeBatch, workers = 16 << 20, 2 << 20, 2
	peak := arPeakRSS(t, bin, "replicate", srv.DBURL(src), srv.DBURL(tgt), "--create-target", "-q",
		fmt.Sprint("--max-inflight-bytes=", budget), fmt.Sprint("--write-batch-bytes=", writeBatch), fmt.Sprint("--workers=", workers))
	bound := int64(budget + workers*3*writeBatch + 48<<20)
	t.Logf("peak RSS %.1f MiB for %d MiB of attachments; bound %.1f MiB", float64(peak)/(1<<20), docs*attSize>>20, float64(bound)/(1<<20))
	if peak > bound {
		t.Errorf("peak RSS %d bytes exceeds budget+overhead %d", peak, bound)
	}
	couchtest.AssertEqual(t, srv.DBURL(src), srv.DBURL(tgt), couchtest.CompareOptions{PouchDBRevpos: true})
}

// TestPeakRSSStreamsLargeAttachment copies one 64 MB attachment under an
// 8 MiB budget: it is piped from the source's answer into the target's
// multipart/related PUT, so the process never holds it (peak RSS of the
// sofa process alone, see arPeakRSS).
func TestPeakRSSStreamsLargeAttachment(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 64 MB")
	}
	srv := couchtest.Start(t)
	c := srv.Client()
	if err := c.CreateDB(t.Context(), "huge"); err != nil {
		t.Fatal(err)
	}
	rev, err := c.PutDoc(t.Context(), "huge", "doc", map[string]any{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 64<<20)
	rand.Read(data)
	if _, err := c.PutAttachment(t.Context(), "huge", "doc", rev, "huge.bin", "application/octet-stream", data); err != nil {
		t.Fatal(err)
	}
	data = nil
	bin := sofaBin(t)
	const budget = 8 << 20
	peak := arPeakRSS(t, bin, "replicate", srv.DBURL("huge"), srv.DBURL("huge-copy"), "--create-target", "-q",
		fmt.Sprint("--max-inflight-bytes=", budget))
	bound := int64(budget + 48<<20)
	t.Logf("peak RSS %.1f MiB for a 64 MiB attachment; bound %.1f MiB", float64(peak)/(1<<20), float64(bound)/(1<<20))
	if peak > bound {
		t.Errorf("peak RSS %d bytes exceeds budget+overhead %d: the attachment was held", peak, bound)
	}
	couchtest.AssertEqual(t, srv.DBURL("huge"), srv.DBURL("huge-copy"), couchtest.CompareOptions{PouchDBRevpos: true})
}
