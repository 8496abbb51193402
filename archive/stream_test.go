package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa/replicate"
)

// lockedBuffer is a bytes.Buffer whose length may be read while the
// archive writes into it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

func mustWrite(t *testing.T, d *DBWriter, docs ...*replicate.Doc) {
	t.Helper()
	if rej, err := d.WriteDocs(context.Background(), docs); err != nil || len(rej) > 0 {
		t.Fatalf("WriteDocs(%s): %v %v", d.Name(), rej, err)
	}
}

// groupOrder lists the databases' directories in stream order, failing
// when a group is not contiguous; blobs counts the blob members.
func groupOrder(t *testing.T, data []byte) (order []string, blobs map[[32]byte]int) {
	t.Helper()
	blobs = map[[32]byte]int{}
	tr := tar.NewReader(bytes.NewReader(data))
	cur := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return order, blobs
		}
		if err != nil {
			t.Fatal(err)
		}
		p, err := parseName(h.Name)
		if err != nil {
			t.Fatal(err)
		}
		switch p.kind {
		case kindBlob:
			blobs[p.sum]++
		case kindMeta:
			if cur != "" {
				t.Fatalf("group %s starts inside %s", p.dir, cur)
			}
			cur = p.dir
			order = append(order, cur)
		case kindChunk, kindEnd:
			if p.dir != cur {
				t.Fatalf("member %s inside group %s", h.Name, cur)
			}
			if p.kind == kindEnd {
				cur = ""
			}
		}
	}
}

// TestStream_PromotesOpenDatabase: when the owner of the stream closes,
// the open database with the largest spool becomes the owner: its spool
// goes into the stream at once (less the blobs committed meanwhile, taken
// off its counts) and its next members go straight through; a database
// closed meanwhile waits in line and loses the blobs committed before
// it. Groups stay contiguous, every blob is stored once, the counts
// match, and the archive checks out.
func TestStream_PromotesOpenDatabase(t *testing.T) {
	var sink lockedBuffer
	w, err := NewWriter(&sink, Options{TempDir: t.TempDir(), Compression: None, Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	blob := func(s string, n int) []byte { return bytes.Repeat([]byte(s), n) }
	bw, bz, bb, bc := blob("w", 5000), blob("z", 7000), blob("b", 40000), blob("c", 300)
	a, _ := w.Database("a") // the owner
	b, _ := w.Database("b") // spools, the larger spool
	c, _ := w.Database("c") // spools
	mustWrite(t, b, doc("b1", "1-b1", false, `{"_id":"b1"}`, att("w", "x/y", "", bw, int64(len(bw)), 1), att("z", "x/y", "", bz, int64(len(bz)), 1)))
	mustWrite(t, c, doc("c1", "1-c1", false, `{"_id":"c1"}`, att("z", "x/y", "", bz, int64(len(bz)), 1), att("c", "x/y", "", bc, int64(len(bc)), 1)))
	mustWrite(t, a, doc("a1", "1-a1", false, `{"_id":"a1"}`, att("w", "x/y", "", bw, int64(len(bw)), 1)))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if w.ownerNow.Load() != b {
		t.Fatalf("after the owner closed, the owner is %v, want b (the larger spool)", w.ownerNow.Load())
	}
	before := sink.Len()
	mustWrite(t, b, doc("b2", "1-b2", false, `{"_id":"b2"}`, att("b", "x/y", "", bb, int64(len(bb)), 1)))
	if grown := sink.Len() - before; grown < len(bb) {
		t.Errorf("the promoted database's blob did not go straight into the stream (grew %d bytes)", grown)
	}
	if err := c.Close(); err != nil { // waits in line behind b
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := sink.b.Bytes()
	order, blobs := groupOrder(t, data)
	if fmt.Sprint(order) != fmt.Sprint([]string{a.dir, b.dir, c.dir}) {
		t.Errorf("groups in order %v, want a, b, c", order)
	}
	for sum, n := range blobs {
		if n != 1 {
			t.Errorf("blob %x stored %d times", sum[:4], n)
		}
	}
	if len(blobs) != 4 {
		t.Errorf("%d blobs, want 4", len(blobs))
	}
	if _, err := Verify(bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}
	_, got := readArchive(t, data)
	for name, want := range map[string]struct{ blobs, revs int64 }{"a": {1, 1}, "b": {2, 2}, "c": {1, 1}} {
		s := got[name].summary
		if s.Blobs != want.blobs || s.Revisions != want.revs {
			t.Errorf("%s: %d blobs first stored in it, %d revisions; want %d, %d", name, s.Blobs, s.Revisions, want.blobs, want.revs)
		}
	}
	if n := len(got["c"].docs); n != 1 || !bytes.Equal(got["c"].docs[0].Atts[0].Data, bz) {
		t.Errorf("c's revision lost its attachment (stored by b): %+v", got["c"].docs)
	}
}

// TestStream_PaceHoldsSpoolers: with SpoolAhead, a database copied
// through the engine while another owns the stream stops reading once
// the spools hold SpoolAhead bytes (its batches wait in Pace), and goes on
// when the owner closes; the owner itself never waits, nor does anyone
// with SpoolAhead 0.
func TestStream_PaceHoldsSpoolers(t *testing.T) {
	// the source: an archive of one database of 200 revisions of 4 KiB
	var docs []*replicate.Doc
	for i := range 200 {
		id := fmt.Sprintf("d%03d", i)
		docs = append(docs, doc(id, "1-x", false, fmt.Sprintf(`{"_id":%q,"pad":%q}`, id, bytes.Repeat([]byte{'a' + byte(i%26)}, 4096))))
	}
	src := writeArchive(t, Options{Version: 2}, map[string][]*replicate.Doc{"big": docs}, []string{"big"})

	const limit = 64 << 10
	var sink lockedBuffer
	w, err := NewWriter(&sink, Options{TempDir: t.TempDir(), Compression: None, SpoolAhead: limit, ChunkSize: 8 << 10, Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	owner, _ := w.Database("owner")
	spooler, _ := w.Database("big")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := owner.Pace(ctx, nil); err != nil {
		t.Fatalf("the owner waited: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		rd, err := NewReader(bytes.NewReader(src), nil)
		if err != nil {
			done <- err
			return
		}
		defer rd.Close()
		db, err := rd.Next()
		if err != nil {
			done <- err
			return
		}
		_, err = replicate.Run(ctx, db, spooler, replicate.Options{BatchSize: 10, Workers: 2, CopyMetadata: true})
		if err == nil {
			err = spooler.Close()
		}
		done <- err
	}()
	for w.pacing.Load() == 0 { // the engine holds a batch back
		select {
		case err := <-done:
			t.Fatalf("the copy finished while another database owned the stream: %v (spooled %d)", err, w.spooled.Load())
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	// at most the limit, plus the batches already in flight (2 of 10
	// revisions of 4 KiB), plus the chunk being filled
	if got := w.spooled.Load(); got > limit+2*10*5<<10+8<<10 {
		t.Errorf("spooled %d bytes with a limit of %d", got, limit)
	}
	short, stop := context.WithTimeout(ctx, 20*time.Millisecond)
	if err := spooler.Pace(short, func() error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Pace over the limit returned %v, want it to wait", err)
	}
	stop()
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, got := readArchive(t, sink.b.Bytes())
	gotDocs := got["big"].docs // batches were written two at a time
	sort.Slice(gotDocs, func(i, j int) bool { return gotDocs[i].ID < gotDocs[j].ID })
	equalDocs(t, "big", gotDocs, docs)

	// SpoolAhead 0: no wait
	w2, _ := NewWriter(io.Discard, Options{TempDir: t.TempDir()})
	o2, _ := w2.Database("o")
	s2, _ := w2.Database("s")
	mustWrite(t, s2, docs...)
	if err := s2.Pace(short, nil); err != nil {
		t.Errorf("Pace without SpoolAhead: %v", err)
	}
	o2.Close()
	s2.Close()
	w2.Close()
}

// brokenSink takes n bytes, then fails every write (a reader that went
// away: a closed pipe, a full disk).
type brokenSink struct{ n int }

func (s *brokenSink) Write(p []byte) (int, error) {
	if len(p) > s.n {
		k := s.n
		s.n = 0
		return k, errors.New("broken pipe")
	}
	s.n -= len(p)
	return len(p), nil
}

// TestStream_BrokenStreamStopsSpoolers: once the archive's stream fails
// (its owner's write met a closed pipe), a database spooling meanwhile
// is told at its next write: it does not go on reading its source into
// a spool that can never be written.
func TestStream_BrokenStreamStopsSpoolers(t *testing.T) {
	w, err := NewWriter(&brokenSink{n: 4096}, Options{TempDir: t.TempDir(), Compression: None, ChunkSize: 100, Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := w.Database("a") // the owner
	b, _ := w.Database("b") // spools
	mustWrite(t, b, doc("b1", "1-b1", false, `{"_id":"b1"}`))
	big := bytes.Repeat([]byte("x"), 10000)
	if _, err := a.WriteDocs(t.Context(), []*replicate.Doc{doc("a1", "1-a1", false, `{"_id":"a1"}`, att("x", "x/y", "", big, int64(len(big)), 1))}); err == nil {
		t.Fatal("the owner's write into the broken stream succeeded")
	}
	if _, err := b.WriteDocs(t.Context(), []*replicate.Doc{doc("b2", "1-b2", false, `{"_id":"b2"}`)}); err == nil || !strings.Contains(err.Error(), "broken pipe") {
		t.Errorf("the spooling database's next write: %v, want the stream's error", err)
	}
}
