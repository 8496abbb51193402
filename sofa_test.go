package sofa_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/storage"
	"github.com/sofadb/sofa/verify"
)

func TestMain(m *testing.M) { couchtest.Main(m) }

// TestOpen_Registry: every location goes to its scheme: http(s) to the
// CouchDB client, paths and "-" to an archive; an unknown scheme is
// refused; each scheme redacts its own credentials.
func TestOpen_Registry(t *testing.T) {
	ctx := context.Background()
	var names []string
	for _, s := range sofa.Schemes() {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "http,https,s3," {
		t.Errorf("schemes %q, want http, https, s3 and the archive's (\"\")", got)
	}
	for _, loc := range []string{"backup.sofa", "-", "/tmp/x/y.sofa"} {
		ep, err := sofa.Open(ctx, loc, sofa.OpenOptions{Store: &storage.Memory{}})
		if err != nil || ep.Kind() != sofa.KindArchive || ep.Archive() != loc {
			t.Errorf("Open(%q) = %v, %v; want an archive endpoint", loc, ep, err)
		}
		if sofa.IsURL(loc) {
			t.Errorf("IsURL(%q) = true", loc)
		}
	}
	// an s3:// object is an archive (nothing is sent before it is used)
	if ep, err := sofa.Open(ctx, "s3://bucket/dir/key.sofa", sofa.OpenOptions{}); err != nil || ep.Kind() != sofa.KindArchive || ep.Archive() != "s3://bucket/dir/key.sofa" || sofa.IsURL("s3://bucket/dir/key.sofa") {
		t.Errorf("Open(s3://bucket/dir/key.sofa) = %v, %v; want an archive endpoint", ep, err)
	}
	var oe *sofa.OptionError
	if _, err := sofa.Open(ctx, "s3://bucket", sofa.OpenOptions{}); !errors.As(err, &oe) {
		t.Errorf("Open(s3://bucket) = %v, want an OptionError (no key)", err)
	}
	if _, err := sofa.Open(ctx, "ftp://host/x", sofa.OpenOptions{}); !errors.Is(err, sofa.ErrUnknownScheme) {
		t.Errorf("Open(ftp://...) = %v, want ErrUnknownScheme", err)
	}
	const secret = "s3cr3t-pw"
	for _, loc := range []string{"http://admin:" + secret + "@127.0.0.1:1/db", "https://u:" + secret + "@h:6984", "s3://k:" + secret + "@bucket/x"} {
		if r := sofa.Redact(loc); strings.Contains(r, secret) {
			t.Errorf("Redact(%q) = %q keeps the password", loc, r)
		}
		if !strings.HasPrefix(loc, "s3:") && !sofa.IsURL(loc) {
			t.Errorf("IsURL(%q) = false", loc)
		}
	}
	// A server that does not answer: the error names it without the
	// password.
	_, err := sofa.Open(ctx, "http://admin:"+secret+"@127.0.0.1:1", sofa.OpenOptions{})
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("Open of a dead server: %v", err)
	}
}

// seed writes n documents into db on srv.
func seed(t *testing.T, srv *couchtest.Server, db string, n int) {
	t.Helper()
	ctx := context.Background()
	c := couchtest.NewClient(srv.URL)
	if err := c.CreateDB(ctx, db); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := c.PutDoc(ctx, db, fmt.Sprintf("doc%03d", i), map[string]any{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLibrary_CopyBackupVerify, through the public API only: Copy of a
// server to another, Verify of the two, Backup of the source into an
// in-memory archive, Verify of the archive against the copy, Restore out
// of it.
func TestLibrary_CopyBackupVerify(t *testing.T) {
	ctx := context.Background()
	a, b := couchtest.Start(t), couchtest.Start(t)
	seed(t, a, "alpha", 20)
	seed(t, a, "beta", 5)
	src, err := sofa.Open(ctx, a.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dst, err := sofa.Open(ctx, b.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if src.Kind() != sofa.KindServer {
		t.Fatalf("kind %v, want a server", src.Kind())
	}

	// A selection that matches nothing is an error, not an empty copy.
	_, err = sofa.Copy(ctx, src, dst, sofa.CopyOptions{Selection: sofa.Selection{Include: []string{"nothing-*"}}})
	if err == nil || !strings.Contains(err.Error(), "no database matches") || !errors.Is(err, sofa.ErrNoneSelected) {
		t.Fatalf("empty selection: %v, want one wrapping ErrNoneSelected", err)
	}
	var oe *sofa.OptionError
	if _, err := sofa.Copy(ctx, src, dst, sofa.CopyOptions{Verify: "sometimes"}); !errors.As(err, &oe) {
		t.Fatalf("bad verify mode: %v, want an *OptionError", err)
	}

	sum, err := sofa.Copy(ctx, src, dst, sofa.CopyOptions{Selection: sofa.Selection{Include: []string{"alpha", "beta"}}, Verify: sofa.VerifyFull})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Complete() || sum.DBsTotal != 2 || sum.DocsWritten != 25 {
		t.Fatalf("copy summary: %d of %d ok, %d written", sum.DBsOK, sum.DBsTotal, sum.DocsWritten)
	}
	for _, db := range []string{"alpha", "beta"} {
		couchtest.AssertEqual(t, a.URL+"/"+db, b.URL+"/"+db)
	}

	vs, err := sofa.Verify(ctx, src, dst, sofa.VerifyOptions{Compare: verify.Options{Mode: verify.Full},
		Selection: sofa.Selection{Include: []string{"alpha", "beta"}}})
	if err != nil || !vs.Equal || vs.DBsTotal != 2 {
		t.Fatalf("verify servers: %+v, %v", vs, err)
	}
	// As for a copy, a selection that matches nothing is an error; one
	// shard of a sharded run may be empty.
	none := sofa.Selection{Include: []string{"nothing-*"}}
	if _, err := sofa.Verify(ctx, src, dst, sofa.VerifyOptions{Selection: none}); err == nil || !strings.Contains(err.Error(), "no database matches") || !errors.Is(err, sofa.ErrNoneSelected) {
		t.Fatalf("verify of an empty selection: %v", err)
	}
	none.Sharded = true
	if vs, err := sofa.Verify(ctx, src, dst, sofa.VerifyOptions{Selection: none}); err != nil || vs.DBsTotal != 0 {
		t.Fatalf("verify of an empty shard: %+v, %v", vs, err)
	}

	mem := &storage.Memory{}
	ar, err := sofa.Open(ctx, "alpha.sofa", sofa.OpenOptions{Store: mem})
	if err != nil {
		t.Fatal(err)
	}
	srcDB, err := sofa.Open(ctx, a.URL+"/alpha", sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := sofa.Backup(ctx, srcDB, ar, sofa.BackupOptions{})
	if err != nil || !bs.Complete() || bs.DocsWritten != 20 {
		t.Fatalf("backup: %+v, %v", bs, err)
	}
	if st, err := mem.Stat(ctx, "alpha.sofa"); err != nil || st.Size == 0 {
		t.Fatalf("archive in memory: %+v, %v", st, err)
	}

	if _, err := sofa.Backup(ctx, srcDB, ar, sofa.BackupOptions{}); !errors.Is(err, storage.ErrExist) || !errors.As(err, &oe) {
		t.Fatalf("second backup without Overwrite: %v, want an *OptionError wrapping ErrExist (nothing was done)", err)
	}
	copyDB, err := sofa.Open(ctx, b.URL+"/alpha", sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vs, err = sofa.Verify(ctx, ar, copyDB, sofa.VerifyOptions{Compare: verify.Options{Mode: verify.Full}})
	if err != nil || !vs.Equal || vs.DBsTotal != 1 {
		t.Fatalf("verify archive against the copy: %+v, %v", vs, err)
	}
	if _, err := sofa.Verify(ctx, ar, copyDB, sofa.VerifyOptions{Selection: sofa.Selection{Include: []string{"zzz"}}}); err == nil || !strings.Contains(err.Error(), "no database of the archive matches") {
		t.Fatalf("verify of no database of the archive: %v", err)
	}

	// One database: a missing target is refused unless CreateTarget.
	oneDst, err := sofa.Open(ctx, b.URL+"/alpha-one", sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sofa.CopyDB(ctx, srcDB, oneDst, sofa.CopyDBOptions{}); !errors.Is(err, sofa.ErrNoTarget) {
		t.Fatalf("CopyDB into a missing database: %v, want ErrNoTarget", err)
	}
	res, err := sofa.CopyDB(ctx, srcDB, oneDst, sofa.CopyDBOptions{CreateTarget: true})
	if err != nil || res.Stats.DocsWritten != 20 || len(res.Failures) != 0 {
		t.Fatalf("CopyDB: %+v, %v", res, err)
	}
	couchtest.AssertEqual(t, a.URL+"/alpha", b.URL+"/alpha-one")

	// Restore (a chain of one) out of the in-memory archive, renamed.
	rs, err := sofa.Restore(ctx, []*sofa.Endpoint{ar}, dst, sofa.RestoreOptions{Renames: map[string]string{"alpha": "alpha-restored"}})
	if err != nil || !rs.Complete() || rs.DBsTotal != 1 || rs.DBs[0].Name != "alpha-restored" {
		t.Fatalf("restore: %+v, %v", rs, err)
	}
	couchtest.AssertEqual(t, a.URL+"/alpha", b.URL+"/alpha-restored")
	// Selecting nothing of the archive is an error.
	if _, err := sofa.Restore(ctx, []*sofa.Endpoint{ar}, dst, sofa.RestoreOptions{Selection: sofa.Selection{Include: []string{"zzz"}}}); err == nil || !strings.Contains(err.Error(), "no database of the archive was selected") {
		t.Fatalf("restore of nothing: %v", err)
	}
}
