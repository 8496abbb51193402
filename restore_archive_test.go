package sofa_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/storage"
	"github.com/sofadb/sofa/verify"
)

// Restores into an archive: a chain, and the set of a sharded backup,
// consolidated into one full archive (helpers in anypair_test.go).

// TestRestore_IntoArchive: a chain (full, incremental) restored into an
// archive C, C restored into a new server, equals the source after the
// incremental's changes: documents changed, deleted, added with a large
// attachment, `_security` changed, a database created, one recreated and
// one deleted between the backups (absent from C). An incremental backup
// of the server continues C. Options of a server target are refused.
func TestRestore_IntoArchive(t *testing.T) {
	ctx := t.Context()
	srv := couchtest.Start(t)
	c := srv.Client()
	richDB(t, srv, "keep")
	seed(t, srv, "dropped", 5)
	seed(t, srv, "again", 5)
	dir := t.TempDir()
	server := openAt(t, srv.URL, nil)
	full := openAt(t, filepath.Join(dir, "full.sofa"), nil)
	if sum, err := sofa.Backup(ctx, server, full, sofa.BackupOptions{}); err != nil || !sum.Complete() {
		t.Fatalf("full backup: %+v, %v", sum, err)
	}
	// Changes between the backups.
	var d00 struct {
		Rev string `json:"_rev"`
	}
	if err := c.GetJSON(ctx, "/keep/d00", &d00); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(ctx, "keep", "d00", map[string]any{"_rev": d00.Rev, "n": "changed"}); err != nil {
		t.Fatal(err)
	}
	var d01 struct {
		Rev string `json:"_rev"`
	}
	if err := c.GetJSON(ctx, "/keep/d01", &d01); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(ctx, "keep", "d01", map[string]any{"_rev": d01.Rev, "_deleted": true}); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 90<<10)
	rand.Read(big)
	if _, err := c.BulkDocs(ctx, "keep", true, json.RawMessage(fmt.Sprintf(`{"_id":"added","_attachments":{"b.bin":{"content_type":"application/octet-stream","data":%q}}}`,
		base64.StdEncoding.EncodeToString(big)))); err != nil {
		t.Fatal(err)
	}
	// One branch of the conflict deleted: its leaf 2-bb is replaced by
	// a tombstone 3-x.
	if _, err := c.BulkDocs(ctx, "keep", false,
		json.RawMessage(`{"_id":"conflict","_rev":"3-xx","_deleted":true,"_revisions":{"start":3,"ids":["xx","bb","root"]}}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.PutSecurity(ctx, "keep", couchtest.Security{Admins: couchtest.Group{Names: []string{"ann"}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteDB(ctx, "dropped"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteDB(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	// A new instance_start_time: CouchDB 3 counts it in seconds.
	time.Sleep(1100 * time.Millisecond)
	seed(t, srv, "again", 3)
	seed(t, srv, "later", 4)
	inc := openAt(t, filepath.Join(dir, "inc.sofa"), nil)
	if sum, err := sofa.Backup(ctx, server, inc, sofa.BackupOptions{Since: full.Archive()}); err != nil || !sum.Complete() {
		t.Fatalf("incremental backup: %+v, %v", sum, err)
	}

	chain := []*sofa.Endpoint{full, inc}
	cons := openAt(t, filepath.Join(dir, "cons.sofa"), nil)
	plan, err := sofa.PlanRestore(ctx, chain, sofa.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := plan.Run(ctx, cons)
	if err != nil || !sum.Complete() {
		t.Fatalf("restore into an archive: %+v, %v", sum, err)
	}
	hi, dbsI := listArchive(t, inc)
	if len(dbsI["again"].Since) != 0 {
		t.Fatalf("the incremental holds the recreated database as changes (since %q)", dbsI["again"].Since)
	}
	h, dbs := listArchive(t, cons)
	if h.Since != nil || h.Source != hi.Source || h.Source == "" {
		t.Errorf("consolidated header %+v: want a full archive of %q", h, hi.Source)
	}
	if _, ok := dbs["dropped"]; ok {
		t.Error("the consolidated archive holds a database deleted before the incremental")
	}
	for _, name := range []string{"keep", "again", "later", "_users", "_replicator"} {
		d, ok := dbs[name]
		if !ok || len(d.Since) != 0 || d.Error != "" || string(d.Seq) != string(dbsI[name].Seq) {
			t.Errorf("%s in the consolidated archive: present %v, since %q, error %q, seq %s (in the incremental: seq %s)", name, ok, d.Since, d.Error, d.Seq, dbsI[name].Seq)
		}
	}
	// The consolidated archive holds the leaves only: a revision the
	// incremental replaced (d00's 1-, d01's before its deletion, the
	// conflict's 2-bb) is not one of its records, so it compares equal
	// with the server, bodies and histories included, and counts what a
	// full backup taken now counts.
	vs, err := sofa.Verify(ctx, cons, server, sofa.VerifyOptions{Compare: verify.Options{Mode: verify.Full},
		Selection: sofa.Selection{Include: []string{"keep", "again", "later"}}})
	if err != nil || vs.DBsDiffer != 0 || vs.DBsFailed != 0 {
		t.Errorf("consolidated archive against the server: %v, %+v", err, vs)
		for _, d := range vs.DBs {
			if d.Report != nil && len(d.Report.Differences) > 0 {
				t.Logf("%s: %+v", d.Name, d.Report.Differences)
			}
		}
	}
	now := openAt(t, filepath.Join(dir, "now.sofa"), nil)
	if sum, err := sofa.Backup(ctx, server, now, sofa.BackupOptions{}); err != nil || !sum.Complete() {
		t.Fatalf("full backup after the incremental: %+v, %v", sum, err)
	}
	_, dbsNow := listArchive(t, now)
	for _, name := range []string{"keep", "again", "later"} {
		if got, want := dbs[name].Revisions, dbsNow[name].Revisions; got != want {
			t.Errorf("%s: the consolidated archive holds %d revisions, a full backup now %d", name, got, want)
		}
	}
	tgt := couchtest.Start(t)
	restoreInto(t, []*sofa.Endpoint{cons}, tgt)
	for _, db := range []string{"keep", "again", "later"} {
		assertSame(t, srv, tgt, db)
	}
	// What the chain restored directly gives.
	direct := couchtest.Start(t)
	restoreInto(t, chain, direct)
	for _, db := range []string{"keep", "again", "later"} {
		assertSame(t, direct, tgt, db)
	}
	var all []string
	if err := tgt.Client().GetJSON(ctx, "/_all_dbs", &all); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(all, "dropped") {
		t.Errorf("restore of the consolidated archive created dropped: %v", all)
	}

	// The server's next incremental continues the consolidated archive.
	if _, err := c.PutDoc(ctx, "later", "one-more", map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	next := openAt(t, filepath.Join(dir, "next.sofa"), nil)
	if sum, err := sofa.Backup(ctx, server, next, sofa.BackupOptions{Since: cons.Archive()}); err != nil || !sum.Complete() {
		t.Fatalf("incremental after the consolidated archive: %+v, %v", sum, err)
	}
	if _, dbsN := listArchive(t, next); len(dbsN["later"].Since) == 0 || dbsN["later"].Revisions != 1 || dbsN["keep"].Revisions != 0 {
		t.Errorf("incremental after the consolidated archive: later since %q, %d revisions, keep %d: want 1 and 0", dbsN["later"].Since, dbsN["later"].Revisions, dbsN["keep"].Revisions)
	}

	// Options of a server target, and the same archive, are refused.
	x := openAt(t, filepath.Join(dir, "x.sofa"), nil)
	for _, o := range []sofa.RestoreOptions{{Replace: true}, {ReuseExisting: true}, {Q: 2}} {
		p, err := sofa.PlanRestore(ctx, chain, o)
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Run(ctx, x)
		wantOptionError(t, fmt.Sprintf("restore into an archive with %+v", o), err, "server")
	}
	_, err = plan.Run(ctx, openAt(t, inc.Archive(), nil))
	wantOptionError(t, "restore into an archive of the chain", err, "same archive")
	if _, err := os.Stat(x.Archive()); !os.IsNotExist(err) {
		t.Errorf("a refused restore left %s: %v", x, err)
	}
}

// TestRestore_SetIntoArchive: the set of a sharded backup restored into
// one archive holds every database of its members, and restores equal
// to the source.
func TestRestore_SetIntoArchive(t *testing.T) {
	ctx := t.Context()
	srv := couchtest.Start(t)
	names := []string{"s-a", "s-b", "s-c", "s-d", "s-e"}
	for i, name := range names {
		seed(t, srv, name, 1+i)
	}
	st := &storage.Memory{}
	const n = 2
	for i := range n {
		sum, err := sofa.Backup(ctx, openAt(t, srv.URL, nil), openAt(t, "set.sofa", st),
			sofa.BackupOptions{Selection: sofa.Selection{Include: []string{"s-*"}, Shard: sofa.Shard{Index: i, Count: n}}, SetID: "run"})
		if err != nil || !sum.Complete() {
			t.Fatalf("shard %d: %+v, %v", i, sum, err)
		}
	}
	set, err := sofa.OpenSet(ctx, openAt(t, "set.sofa", st), sofa.SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := sofa.PlanRestoreSet(ctx, set, sofa.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	one := openAt(t, "one.sofa", st)
	if sum, err := plan.Run(ctx, one); err != nil || !sum.Complete() || sum.DBsTotal != len(names) {
		t.Fatalf("restore of the set into an archive: %+v, %v", sum, err)
	}
	h, dbs := listArchive(t, one)
	if h.Shard != nil || len(dbs) != len(names) {
		t.Errorf("one.sofa: shard %+v, databases %v", h.Shard, mapsKeys(dbs))
	}
	tgt := couchtest.Start(t)
	restoreInto(t, []*sofa.Endpoint{one}, tgt)
	for _, name := range names {
		assertSame(t, srv, tgt, name)
	}
}
