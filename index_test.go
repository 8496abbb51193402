package sofa_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/storage"
	"github.com/sofadb/sofa/verify"
)

// countingStore is a storage.Store that counts the bytes read from the
// archives it opens, in order (Read) and at offsets (ReadAt), as an
// object store would count GETs and ranged GETs.
type countingStore struct {
	storage.Store
	seq, at atomic.Int64
}

func (c *countingStore) Open(ctx context.Context, name string) (storage.Reader, error) {
	r, err := c.Store.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return &countingReader{Reader: r, c: c}, nil
}

func (c *countingStore) reset() { c.seq.Store(0); c.at.Store(0) }

type countingReader struct {
	storage.Reader
	c *countingStore
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.Reader.Read(p)
	r.c.seq.Add(int64(n))
	return n, err
}

func (r *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.Reader.ReadAt(p, off)
	r.c.at.Add(int64(n))
	return n, err
}

// TestArchiveIndex_ReadsOnlyWhatIsNeeded: a backup (format version 2)
// into a store that counts what is read: listing it reads only the footer
// and the index (no byte in order, a few KiB at offsets); a restore with
// --include of a small database reads its group and the header, never the
// 3 MiB database beside it, and the restored database equals the source
// (couchtest's oracle).
func TestArchiveIndex_ReadsOnlyWhatIsNeeded(t *testing.T) {
	ctx := context.Background()
	a, b := couchtest.Start(t), couchtest.Start(t)
	c := couchtest.NewClient(a.URL)
	for _, db := range []string{"big", "small", "other"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		blob := make([]byte, 1<<20)
		rand.Read(blob)
		doc := json.RawMessage(fmt.Sprintf(`{"_id":"b%d","_attachments":{"x.bin":{"content_type":"application/octet-stream","data":%q}}}`, i, base64.StdEncoding.EncodeToString(blob)))
		if _, err := c.BulkDocs(ctx, "big", true, doc); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if _, err := c.PutDoc(ctx, "small", fmt.Sprintf("s%d", i), map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.PutDoc(ctx, "other", fmt.Sprintf("o%d", i), map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	st := &countingStore{Store: &storage.Memory{}}
	src, err := sofa.Open(ctx, a.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := sofa.Open(ctx, "b.sofa", sofa.OpenOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sofa.Backup(ctx, src, ar, sofa.BackupOptions{Selection: sofa.Selection{Include: []string{"big", "small", "other"}}}); err != nil {
		t.Fatal(err)
	}
	info, err := st.Stat(ctx, "b.sofa")
	if err != nil || info.Size < 3<<20 {
		t.Fatalf("archive: %+v, %v", info, err)
	}

	// ls: footer and index only.
	st.reset()
	f, err := st.Open(ctx, "b.sofa")
	if err != nil {
		t.Fatal(err)
	}
	h, dbs, err := archive.List(f)
	f.Close()
	if err != nil || h.Version != archive.FormatVersion || len(dbs) != 3 {
		t.Fatalf("List: %+v %v %v", h, dbs, err)
	}
	if st.seq.Load() != 0 || st.at.Load() > archive.FooterSize+1024+16<<10 {
		t.Errorf("List read %d bytes in order and %d at offsets, of an archive of %d", st.seq.Load(), st.at.Load(), info.Size)
	}
	t.Logf("ls: %d bytes at offsets of %d", st.at.Load(), info.Size)

	// restore --include small: not the big group.
	st.reset()
	dst, err := sofa.Open(ctx, b.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := sofa.Restore(ctx, []*sofa.Endpoint{ar}, dst, sofa.RestoreOptions{Selection: sofa.Selection{Include: []string{"small"}}})
	if err != nil || !sum.Complete() || sum.DBsTotal != 1 {
		t.Fatalf("restore --include small: %+v, %v", sum, err)
	}
	couchtest.AssertEqual(t, a.DBURL("small"), b.DBURL("small"), couchtest.CompareOptions{Security: true, RevsLimit: true})
	if read := st.seq.Load() + st.at.Load(); read > 256<<10 {
		t.Errorf("restore --include small read %d bytes (%d in order) of an archive of %d", read, st.seq.Load(), info.Size)
	}
	t.Logf("restore --include small: %d bytes in order, %d at offsets, of %d", st.seq.Load(), st.at.Load(), info.Size)

	// verify --include small against the copy: not the big group either.
	st.reset()
	vs, err := sofa.Verify(ctx, ar, dst, sofa.VerifyOptions{Selection: sofa.Selection{Include: []string{"small"}}, Compare: verify.Options{Mode: verify.Full}})
	if err != nil || !vs.Equal || vs.DBsTotal != 1 {
		t.Fatalf("verify --include small: %+v, %v", vs, err)
	}
	if read := st.seq.Load() + st.at.Load(); read > 256<<10 {
		t.Errorf("verify --include small read %d bytes of an archive of %d", read, info.Size)
	}

	// restore --include big: its attachments come back whole.
	sum, err = sofa.Restore(ctx, []*sofa.Endpoint{ar}, dst, sofa.RestoreOptions{Selection: sofa.Selection{Include: []string{"big"}}})
	if err != nil || !sum.Complete() {
		t.Fatalf("restore --include big: %+v, %v", sum, err)
	}
	couchtest.AssertEqual(t, a.DBURL("big"), b.DBURL("big"))
}
