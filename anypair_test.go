package sofa_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/storage"
)

// The pairs of endpoints besides server to server, server to archive and
// archive to server: an archive backed up into a new archive, a chain
// restored into an archive (consolidated), and Copy refusing archives.

// richDB creates db on srv with what a copy must keep: small documents, a
// design document, a conflict, a tombstone, attachments small and of
// 100 KiB, `_security` and `_revs_limit`.
func richDB(t *testing.T, srv *couchtest.Server, db string) {
	t.Helper()
	ctx := t.Context()
	c := srv.Client()
	if err := c.CreateDB(ctx, db); err != nil {
		t.Fatal(err)
	}
	var docs []json.RawMessage
	for i := range 20 {
		docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"d%02d","n":%d}`, i, i)))
	}
	big := make([]byte, 100<<10)
	rand.Read(big)
	docs = append(docs,
		json.RawMessage(`{"_id":"_design/app","views":{"all":{"map":"function(d){emit(d._id)}"}}}`),
		json.RawMessage(fmt.Sprintf(`{"_id":"atts","_attachments":{"big.bin":{"content_type":"application/octet-stream","data":%q},"note.txt":{"content_type":"text/plain","data":%q}}}`,
			base64.StdEncoding.EncodeToString(big), base64.StdEncoding.EncodeToString([]byte(strings.Repeat("sofa ", 300))))))
	if _, err := c.BulkDocs(ctx, db, true, docs...); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BulkDocs(ctx, db, false,
		json.RawMessage(`{"_id":"conflict","_rev":"2-aa","v":"a","_revisions":{"start":2,"ids":["aa","root"]}}`),
		json.RawMessage(`{"_id":"conflict","_rev":"2-bb","v":"b","_revisions":{"start":2,"ids":["bb","root"]}}`)); err != nil {
		t.Fatal(err)
	}
	rev, err := c.PutDoc(ctx, db, "gone", map[string]any{"v": 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(ctx, db, "gone", map[string]any{"_rev": rev, "_deleted": true}); err != nil {
		t.Fatal(err)
	}
	if err := c.PutSecurity(ctx, db, couchtest.Security{Members: couchtest.Group{Names: []string{"bob"}, Roles: []string{"staff"}}}); err != nil {
		t.Fatal(err)
	}
	if srv.Kind != couchtest.CouchDB {
		return // PouchDB Server has no _revs_limit to set
	}
	if _, err := c.Do(ctx, "PUT", "/"+db+"/_revs_limit", 77, nil); err != nil {
		t.Fatal(err)
	}
}

// assertSame compares db on a and b with the oracle, `_security`
// included, and `_revs_limit` on CouchDB (on PouchDB Server, which has
// none and rewrites revpos, attachments are compared without it).
func assertSame(t *testing.T, a, b *couchtest.Server, db string) {
	t.Helper()
	couch := a.Kind == couchtest.CouchDB
	couchtest.AssertEqual(t, a.DBURL(db), b.DBURL(db), couchtest.CompareOptions{Security: true, RevsLimit: couch, PouchDBRevpos: !couch})
}

// openAt opens location in st (nil: files).
func openAt(t *testing.T, location string, st storage.Store) *sofa.Endpoint {
	t.Helper()
	ep, err := sofa.Open(t.Context(), location, sofa.OpenOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// listArchive reads the header and the manifest of archive ep.
func listArchive(t *testing.T, ep *sofa.Endpoint) (archive.Header, map[string]archive.DBSummary) {
	t.Helper()
	f, err := ep.Store().Open(t.Context(), ep.Archive())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, dbs, err := archive.List(f)
	if err != nil {
		t.Fatalf("%s: %v", ep, err)
	}
	out := map[string]archive.DBSummary{}
	for _, d := range dbs {
		out[d.Name] = d
	}
	return h, out
}

func restoreInto(t *testing.T, archives []*sofa.Endpoint, srv *couchtest.Server) *sofa.Summary {
	t.Helper()
	dst := openAt(t, srv.URL, nil)
	sum, err := sofa.Restore(t.Context(), archives, dst, sofa.RestoreOptions{Selection: sofa.Selection{Exclude: []string{"_*"}}})
	if err != nil || !sum.Complete() {
		t.Fatalf("restore: %+v, %v", sum, err)
	}
	return sum
}

func wantOptionError(t *testing.T, what string, err error, says string) {
	t.Helper()
	var oe *sofa.OptionError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), says) {
		t.Errorf("%s: %v, want an *OptionError saying %q", what, err, says)
	}
}

// TestBackup_FromArchive: server -> archive A -> archive B (a backup
// from A, from a file and from an archive read in order) -> a new server
// equals the source; B records A's Source and A's seqs, so an incremental
// backup of the server continues B; --include selects; --since, --shard,
// an incremental source and the same archive are refused.
func TestBackup_FromArchive(t *testing.T) {
	ctx := t.Context()
	srv := couchtest.Start(t)
	richDB(t, srv, "rich")
	seed(t, srv, "plain", 30)
	dir := t.TempDir()
	server := openAt(t, srv.URL, nil)
	a := openAt(t, filepath.Join(dir, "a.sofa"), nil)
	if sum, err := sofa.Backup(ctx, server, a, sofa.BackupOptions{}); err != nil || !sum.Complete() {
		t.Fatalf("backup of the server: %+v, %v", sum, err)
	}
	b := openAt(t, filepath.Join(dir, "b.sofa"), nil)
	sum, err := sofa.Backup(ctx, a, b, sofa.BackupOptions{Tool: "sofa test"})
	if err != nil || !sum.Complete() {
		t.Fatalf("backup of the archive: %+v, %v", sum, err)
	}
	ha, dbsA := listArchive(t, a)
	hb, dbsB := listArchive(t, b)
	if hb.Source == "" || hb.Source != ha.Source || hb.Since != nil || hb.Tool != "sofa test" || hb.ID == ha.ID {
		t.Errorf("header of B %+v, A %+v: want A's source, a full archive of its own", hb, ha)
	}
	if got, want := mapsKeys(dbsB), mapsKeys(dbsA); !slices.Equal(got, want) {
		t.Errorf("B holds %v, A %v", got, want)
	}
	for name, da := range dbsA {
		db := dbsB[name]
		if string(db.Seq) != string(da.Seq) || len(db.Checkpoints) != len(da.Checkpoints) || db.Revisions != da.Revisions || db.Error != "" {
			t.Errorf("%s in B: seq %s, %d checkpoints, %d revisions, error %q; in A: seq %s, %d checkpoints, %d revisions",
				name, db.Seq, len(db.Checkpoints), db.Revisions, db.Error, da.Seq, len(da.Checkpoints), da.Revisions)
		}
	}
	tgt := couchtest.Start(t)
	restoreInto(t, []*sofa.Endpoint{b}, tgt)
	for _, db := range []string{"rich", "plain"} {
		assertSame(t, srv, tgt, db)
	}

	// From an archive read in order (stdin), with --include.
	st := &inOrderStore{}
	raw, err := os.ReadFile(a.Archive())
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, &st.Memory, "a.sofa", raw)
	c := openAt(t, filepath.Join(dir, "c.sofa"), nil)
	sum, err = sofa.Backup(ctx, openAt(t, "a.sofa", st), c, sofa.BackupOptions{Selection: sofa.Selection{Include: []string{"rich"}}})
	if err != nil || !sum.Complete() || sum.DBsTotal != 1 {
		t.Fatalf("backup of an archive read in order: %+v, %v", sum, err)
	}
	if _, dbsC := listArchive(t, c); len(dbsC) != 1 || dbsC["rich"].Name != "rich" {
		t.Errorf("--include rich: C holds %v", mapsKeys(dbsC))
	}
	tgt2 := couchtest.Start(t)
	restoreInto(t, []*sofa.Endpoint{c}, tgt2)
	assertSame(t, srv, tgt2, "rich")

	// A damaged archive read in order (stdin, "-": its manifest is not
	// read first): the new archive is not written (it would lack, without
	// saying so, what comes after the damage).
	writeAll(t, &st.Memory, "-", raw[:len(raw)*2/3])
	cut := openAt(t, filepath.Join(dir, "cut.sofa"), nil)
	if _, err := sofa.Backup(ctx, openAt(t, "-", st), cut, sofa.BackupOptions{}); err == nil || !strings.Contains(err.Error(), "not written") {
		t.Errorf("backup of a truncated archive read in order: %v, want it to say the archive was not written", err)
	}
	if _, err := os.Stat(cut.Archive()); !os.IsNotExist(err) {
		t.Errorf("backup of a truncated archive wrote %s: %v", cut, err)
	}

	// The server's next incremental backup continues B as it would A.
	if _, err := srv.Client().PutDoc(ctx, "rich", "new", map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	inc := openAt(t, filepath.Join(dir, "inc.sofa"), nil)
	if sum, err := sofa.Backup(ctx, server, inc, sofa.BackupOptions{Since: b.Archive()}); err != nil || !sum.Complete() {
		t.Fatalf("incremental after B: %+v, %v", sum, err)
	}
	if _, dbsI := listArchive(t, inc); len(dbsI["rich"].Since) == 0 || dbsI["rich"].Revisions != 1 || dbsI["plain"].Revisions != 0 {
		t.Errorf("incremental after B: rich since %q, %d revisions; plain %d: want 1 and 0 since B's seqs", dbsI["rich"].Since, dbsI["rich"].Revisions, dbsI["plain"].Revisions)
	}

	// An incremental written over the archive it continues (a nightly
	// job reusing one name, with Overwrite) would cut the chain: refused,
	// the archive kept (found by a tester: it was replaced, exit 0).
	before, err := os.ReadFile(inc.Archive())
	if err != nil {
		t.Fatal(err)
	}
	for _, force := range []bool{true, false} { // without --force, not "exists (use --force)"
		_, err = sofa.Backup(ctx, server, openAt(t, filepath.Join(dir, ".", "inc.sofa"), nil), sofa.BackupOptions{Since: inc.Archive(), Overwrite: force})
		wantOptionError(t, "an incremental over the archive it continues", err, "is the archive this backup writes")
	}
	if after, err := os.ReadFile(inc.Archive()); err != nil || !bytes.Equal(before, after) {
		t.Errorf("the refused incremental changed %s (%v)", inc, err)
	}

	// Refusals: nothing written.
	x := openAt(t, filepath.Join(dir, "x.sofa"), nil)
	_, err = sofa.Backup(ctx, a, x, sofa.BackupOptions{Since: b.Archive()})
	wantOptionError(t, "--since from an archive", err, "--since")
	_, err = sofa.Backup(ctx, a, x, sofa.BackupOptions{Selection: sofa.Selection{Shard: sofa.Shard{Index: 0, Count: 2}}})
	wantOptionError(t, "--shard from an archive", err, "--shard")
	_, err = sofa.Backup(ctx, inc, x, sofa.BackupOptions{})
	wantOptionError(t, "an incremental source", err, "sofa restore")
	_, err = sofa.Backup(ctx, a, openAt(t, filepath.Join(dir, ".", "a.sofa"), nil), sofa.BackupOptions{Overwrite: true})
	wantOptionError(t, "the same archive", err, "same archive")
	_, err = sofa.Backup(ctx, a, server, sofa.BackupOptions{})
	wantOptionError(t, "an archive into a server", err, "sofa restore")
	if _, err := os.Stat(x.Archive()); !os.IsNotExist(err) {
		t.Errorf("a refused backup left %s: %v", x, err)
	}
}

// TestBackup_FromArchiveNotWhole: a database the source archive holds
// not whole (its backup failed part way) is copied as far as it goes,
// stays marked not whole in the new archive and fails in the Summary; the
// others are ok.
func TestBackup_FromArchiveNotWhole(t *testing.T) {
	ctx := t.Context()
	st := &storage.Memory{}
	sink, err := st.Create(ctx, "part.sofa", storage.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := archive.NewWriter(sink, archive.Options{Source: "src-uuid"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"whole", "part"} {
		d, err := w.Database(name)
		if err != nil {
			t.Fatal(err)
		}
		d.SetSourceInfo(replicate.DBInfo{Name: name, DocCount: 2})
		var docs []*replicate.Doc
		for i := range 2 {
			id := fmt.Sprintf("d%d", i)
			docs = append(docs, &replicate.Doc{ID: id, Rev: "1-a", Body: []byte(fmt.Sprintf(`{"_id":%q,"_rev":"1-a"}`, id)),
				Revisions: replicate.Revisions{Start: 1, IDs: []string{"a"}}})
		}
		if _, err := d.WriteDocs(ctx, docs); err != nil {
			t.Fatal(err)
		}
		if name == "part" {
			err = d.Abort("source went away")
		} else {
			err = d.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sink.Commit(); err != nil {
		t.Fatal(err)
	}
	src, dst := openAt(t, "part.sofa", st), openAt(t, "new.sofa", st)
	sum, err := sofa.Backup(ctx, src, dst, sofa.BackupOptions{})
	if err != nil || sum.Complete() || sum.DBsOK != 1 || sum.DBsFailed != 1 {
		t.Fatalf("backup: %+v, %v; want whole ok, part failed", sum, err)
	}
	for _, r := range sum.DBs {
		if (r.Name == "part") != (r.Status == fleet.StatusFailed) || r.Name == "part" && !strings.Contains(r.Error, "source went away") {
			t.Errorf("%s: %s %q", r.Name, r.Status, r.Error)
		}
	}
	h, dbs := listArchive(t, dst)
	if h.Source != "src-uuid" {
		t.Errorf("source %q, want src-uuid", h.Source)
	}
	if p := dbs["part"]; !strings.Contains(p.Error, "source went away") || p.Revisions != 2 {
		t.Errorf("part in the new archive: error %q, %d revisions; want marked not whole, its 2 revisions kept", p.Error, p.Revisions)
	}
	if d := dbs["whole"]; d.Error != "" || d.Revisions != 2 {
		t.Errorf("whole in the new archive: error %q, %d revisions", d.Error, d.Revisions)
	}
}

// TestCopy_ArchiveRefused: Copy with an archive on either side names the
// verb to use.
func TestCopy_ArchiveRefused(t *testing.T) {
	ctx := context.Background()
	srv := couchtest.Start(t)
	server := openAt(t, srv.URL, nil)
	ar := openAt(t, filepath.Join(t.TempDir(), "a.sofa"), nil)
	_, err := sofa.Copy(ctx, server, ar, sofa.CopyOptions{})
	wantOptionError(t, "copy into an archive", err, "use backup")
	_, err = sofa.Copy(ctx, ar, server, sofa.CopyOptions{})
	wantOptionError(t, "copy from an archive", err, "use restore")
	_, err = sofa.Copy(ctx, ar, openAt(t, filepath.Join(t.TempDir(), "b.sofa"), nil), sofa.CopyOptions{})
	wantOptionError(t, "copy of an archive", err, "use backup")
	_, err = sofa.Copy(ctx, ar, ar, sofa.CopyOptions{})
	wantOptionError(t, "copy of an archive onto itself", err, "same archive")
}

func mapsKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
