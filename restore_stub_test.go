package sofa_test

import (
	"bytes"
	"crypto/rand"
	"path/filepath"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/recproxy"
)

// Conformance A5 on the restore path: a chain whose incremental archive
// holds a body-only edit of a document with a 1 MiB attachment, restored
// into CouchDB, sends that attachment once (the full archive's step): the
// incremental's revision names it as a stub, as the target already holds
// the ancestor (its _revs_diff says so). The copy is equal, bytes
// included, and the summary's bytes count what was sent.
func TestRestore_ChainSendsUnchangedAttachmentOnce(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "stubs follow the target's possible_ancestors, which PouchDB Server does not report")
	ctx := t.Context()
	src := couchtest.Start(t)
	c := src.Client()
	if err := c.CreateDB(ctx, "a5"); err != nil {
		t.Fatal(err)
	}
	rev, err := c.PutDoc(ctx, "a5", "doc", map[string]any{"v": 1})
	if err != nil {
		t.Fatal(err)
	}
	att := make([]byte, 1<<20)
	if _, err := rand.Read(att); err != nil {
		t.Fatal(err)
	}
	if _, err = c.PutAttachment(ctx, "a5", "doc", rev, "f.bin", "application/octet-stream", att); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	server := openAt(t, src.URL, nil)
	full := openAt(t, filepath.Join(dir, "full.sofa"), nil)
	if sum, err := sofa.Backup(ctx, server, full, sofa.BackupOptions{Selection: sofa.Selection{Include: []string{"a5"}}}); err != nil || !sum.Complete() {
		t.Fatalf("full backup: %+v, %v", sum, err)
	}
	var doc map[string]any
	if err := c.GetJSON(ctx, "/a5/doc", &doc); err != nil {
		t.Fatal(err)
	}
	doc["v"] = 2
	if _, err := c.PutDoc(ctx, "a5", "doc", doc); err != nil {
		t.Fatal(err)
	}
	inc := openAt(t, filepath.Join(dir, "inc.sofa"), nil)
	if sum, err := sofa.Backup(ctx, server, inc, sofa.BackupOptions{Since: full.Archive(), Selection: sofa.Selection{Include: []string{"a5"}}}); err != nil || !sum.Complete() {
		t.Fatalf("incremental backup: %+v, %v", sum, err)
	}

	dst := couchtest.StartKind(t, src.Kind)
	rec := recproxy.Start(t, dst.URL)
	sum, err := sofa.Restore(ctx, []*sofa.Endpoint{full, inc}, openAt(t, rec.URL, nil), sofa.RestoreOptions{Selection: sofa.Selection{Include: []string{"a5"}}})
	if err != nil || !sum.Complete() {
		t.Fatalf("chain restore: %+v, %v", sum, err)
	}
	var sent int64
	for _, e := range rec.Recorded() {
		sent += e.ReqBytes
	}
	if sent > int64(len(att))*3/2 {
		t.Errorf("the chain restore sent %d bytes to the target for one %d-byte attachment: it travelled twice", sent, len(att))
	}
	if sum.Bytes > int64(len(att))*3/2 {
		t.Errorf("the summary counts %d bytes sent, want about one attachment (%d)", sum.Bytes, len(att))
	}
	couchtest.AssertEqual(t, src.URL+"/a5", dst.URL+"/a5")
	var got []byte
	if _, err := c.Do(ctx, "GET", "/a5/doc/f.bin", nil, &got); err == nil && !bytes.Equal(got, att) {
		t.Error("source attachment read back differs (test setup)")
	}
}
