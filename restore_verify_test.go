package sofa_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/recproxy"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/storage"
)

// infoReads are the requests of a recording that read a database's
// counts (GET /db, POST /_dbs_info).
func infoReads(p *recproxy.Proxy, db string) int {
	n := len(p.Filter("POST", "/_dbs_info"))
	for _, e := range p.Filter("GET", "/"+db) {
		if e.Path == "/"+db {
			n++
		}
	}
	return n
}

// TestRestore_Verify: a restore checks each database only when asked
// (Verify; the default adds no request). A target that lost its
// documents but kept the checkpoint (so a resumed restore writes
// nothing) is found short by the count check, compared with the archive,
// restored once more and then equal; a document the target holds at the
// archive's revision with another body cannot be fixed by a copy and is
// reported (verify_body, partial).
func TestRestore_Verify(t *testing.T) {
	ctx := t.Context()
	srv := couchtest.Start(t)
	seed(t, srv, "lost", 5)
	seed(t, srv, "clash", 3)
	st := &storage.Memory{}
	src, err := sofa.Open(ctx, srv.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := sofa.Open(ctx, "all.sofa", sofa.OpenOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := sofa.Backup(ctx, src, ar, sofa.BackupOptions{Selection: sofa.Selection{Include: []string{"lost", "clash"}}}); err != nil || !sum.Complete() {
		t.Fatalf("backup: %+v, %v", sum, err)
	}
	f, err := st.Open(ctx, "all.sofa")
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := archive.ReadHeader(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var log logLines
	restore := func(dst *sofa.Endpoint, o sofa.RestoreOptions) *sofa.Summary {
		t.Helper()
		o.Logf = log.logf
		sum, err := sofa.Restore(ctx, []*sofa.Endpoint{ar}, dst, o)
		if err != nil {
			t.Fatalf("restore: %v", err)
		}
		return sum
	}
	lost := sofa.Selection{Include: []string{"lost"}}

	tgt := couchtest.Start(t)
	rec := recproxy.Start(t, tgt.URL)
	dst, err := sofa.Open(ctx, rec.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum := restore(dst, sofa.RestoreOptions{Selection: lost}); !sum.Complete() {
		t.Fatalf("restore: %+v", sum)
	}
	if n := infoReads(rec, "lost"); n != 0 {
		t.Errorf("restore without Verify read the target's counts %d times, want none", n)
	}
	if sum := restore(dst, sofa.RestoreOptions{Selection: lost, Renames: map[string]string{"lost": "lost2"}, Verify: sofa.VerifyCheap}); !sum.Complete() {
		t.Fatalf("restore as lost2: %+v", sum)
	}
	if n := infoReads(rec, "lost2"); n == 0 {
		t.Error("restore with Verify never read the target's counts")
	}

	// Lose the target's documents but keep its checkpoint.
	id := replicate.ReplicationID("sofa-archive:"+hdr.ID+"/lost", dst.Couch().Server.DB("lost").Identity())
	c := tgt.Client()
	var ckpt map[string]any
	if err := c.GetJSON(ctx, "/lost/_local/"+url.PathEscape(id), &ckpt); err != nil {
		t.Fatalf("target checkpoint: %v", err)
	}
	delete(ckpt, "_rev")
	if err := c.DeleteDB(ctx, "lost"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateDB(ctx, "lost"); err != nil {
		t.Fatal(err)
	}
	if err := c.PutJSON(ctx, "/lost/_local/"+url.PathEscape(id), ckpt, nil); err != nil {
		t.Fatal(err)
	}
	sum := restore(dst, sofa.RestoreOptions{Selection: lost, Verify: sofa.VerifyCheap})
	if !sum.Complete() || sum.DocsWritten != 5 {
		t.Errorf("restore with Verify over the emptied target: %d of %d ok, %d written; want complete, 5 written (by the second copy): %+v", sum.DBsOK, sum.DBsTotal, sum.DocsWritten, sum.DBs)
	}
	if logged := strings.Join(log.lines(), "\n"); !strings.Contains(logged, "copying it once more") {
		t.Errorf("no second copy logged:\n%s", logged)
	}
	couchtest.AssertEqual(t, srv.DBURL("lost"), tgt.DBURL("lost"))

	// The target holds doc001 at the archive's revision with another
	// body: reported, not fixed.
	var doc struct {
		Rev string `json:"_rev"`
	}
	if err := srv.Client().GetJSON(ctx, "/clash/doc001", &doc); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateDB(ctx, "clash"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BulkDocs(ctx, "clash", false, json.RawMessage(`{"_id":"doc001","_rev":"`+doc.Rev+`","n":999}`)); err != nil {
		t.Fatal(err)
	}
	sum = restore(dst, sofa.RestoreOptions{Selection: sofa.Selection{Include: []string{"clash"}}, ReuseExisting: true, Verify: sofa.VerifyFull})
	if sum.DBsPartial != 1 || len(sum.DBs) != 1 {
		t.Fatalf("restore over the clash: %+v", sum)
	}
	if f := sum.DBs[0].Failures; len(f) != 1 || f[0].ID != "doc001" || f[0].Rev != doc.Rev || f[0].Error != "verify_body" {
		t.Errorf("failures = %+v, want doc001 %s verify_body", f, doc.Rev)
	}
}
