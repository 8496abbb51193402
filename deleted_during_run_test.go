package sofa_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// TestCopy_DatabaseDeletedDuringRun: a database the source deletes while
// a whole-server copy runs (its feed is held until the database is
// deleted) is left out of the run with the reason, not failed: the run
// is complete (with thousands of tenants a nightly run always met one,
// and ended with exit 3). The other databases are copied.
func TestCopy_DatabaseDeletedDuringRun(t *testing.T) {
	src, dst := couchtest.Start(t), couchtest.Start(t)
	sum := deletedDuringRun(t, src, func(from *sofa.Endpoint) (*sofa.Summary, error) {
		return sofa.Copy(t.Context(), from, openAt(t, dst.URL, nil), sofa.CopyOptions{Selection: sofa.Selection{Include: []string{"keep", "gone"}}})
	})
	if sum != nil {
		assertSame(t, src, dst, "keep")
	}
}

// TestBackup_DatabaseDeletedDuringRun: the same for a backup, but the
// group the archive began for the deleted database stays in it, marked
// incomplete (as a verify of the archive says), so the backup does not
// leave it out: it fails it, and the backup is not complete (found by a
// tester: it exited 0 with the archive incomplete).
func TestBackup_DatabaseDeletedDuringRun(t *testing.T) {
	src := couchtest.Start(t)
	arch := openAt(t, filepath.Join(t.TempDir(), "b.sofa"), nil)
	seed(t, src, "keep", 3)
	seed(t, src, "gone", 3)
	hold := faultproxy.Rule{Name: "hold", Method: "GET", Path: `^/gone/_changes$`, Times: 1, Delay: 3 * time.Second, Fault: faultproxy.Forward}
	sum, err := deleteGoneWhen(t, src, hold, func(p *faultproxy.Proxy) bool { return p.Rule(hold.Name).Matched > 0 }, func(from *sofa.Endpoint) (*sofa.Summary, error) {
		return sofa.Backup(t.Context(), from, arch, sofa.BackupOptions{Selection: sofa.Selection{Include: []string{"keep", "gone"}}})
	})
	if err != nil || sum.Complete() || sum.DBsOK != 1 || len(sum.LeftOut) != 0 {
		t.Fatalf("backup: %v, %+v; want keep ok, gone failed, nothing left out", err, sum)
	}
	const says = "deleted at the source during the backup: the archive holds the 0 revisions read before, marked incomplete"
	for _, d := range sum.DBs {
		if d.Name == "gone" && !strings.HasPrefix(d.Error, says) {
			t.Errorf("gone: %s %q, want failed: %s", d.Status, d.Error, says)
		}
	}
	_, dbs := listArchive(t, arch)
	if dbs["keep"].Error != "" || dbs["keep"].Revisions != 3 {
		t.Errorf("keep in the archive: %+v", dbs["keep"])
	}
	if g := dbs["gone"]; !strings.HasPrefix(g.Error, says) {
		t.Errorf("gone in the archive, marked %q, want %s", g.Error, says)
	}
}

// deletedDuringRun seeds keep and gone on src, runs run through a proxy
// that holds gone's feed until gone is deleted, and checks the run left
// gone out, complete; nil after a failed check.
func deletedDuringRun(t *testing.T, src *couchtest.Server, run func(from *sofa.Endpoint) (*sofa.Summary, error)) *sofa.Summary {
	t.Helper()
	seed(t, src, "keep", 3)
	seed(t, src, "gone", 3)
	hold := faultproxy.Rule{Name: "hold", Method: "GET", Path: `^/gone/_changes$`, Times: 1, Delay: 3 * time.Second, Fault: faultproxy.Forward}
	sum, err := deleteGoneWhen(t, src, hold, func(p *faultproxy.Proxy) bool { return p.Rule(hold.Name).Matched > 0 }, run)
	if err != nil || !sum.Complete() || sum.DBsTotal != 1 {
		t.Errorf("run: %v, databases %+v; want keep done, complete", err, sum.DBs)
		return nil
	}
	if len(sum.LeftOut) != 1 || sum.LeftOut[0].Name != "gone" || sum.LeftOut[0].Reason != "deleted at the source during the run" {
		t.Errorf("left out: %+v, want gone, deleted at the source during the run", sum.LeftOut)
	}
	return sum
}

// deleteGoneWhen runs run through a proxy of src holding requests by
// hold, deletes the database gone at src once ready says so (failing the
// test if the run ends first), and returns the run's summary and error.
func deleteGoneWhen(t *testing.T, src *couchtest.Server, hold faultproxy.Rule, ready func(p *faultproxy.Proxy) bool, run func(from *sofa.Endpoint) (*sofa.Summary, error)) (*sofa.Summary, error) {
	t.Helper()
	p := faultproxy.StartT(t, src.URL)
	if err := p.SetRules(hold); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var sum *sofa.Summary
	var err error
	go func() {
		defer close(done)
		sum, err = run(openAt(t, p.URL, nil))
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !ready(p) {
		select {
		case <-done:
			t.Fatalf("the run ended before gone was deleted: %+v, %v", sum, err)
		case <-tick.C:
		}
	}
	if _, err := couchtest.NewClient(src.URL).Do(t.Context(), "DELETE", "/gone", nil, nil); err != nil {
		t.Fatal(err)
	}
	<-done
	return sum, err
}

// TestCopy_DatabaseDeletedDuringRun_PartialNamed: a database deleted at
// the source after part of it was written to the target is left out
// with a reason that says a partial copy stays on the target (it said
// only "deleted", and later runs never mentioned the half copy).
func TestCopy_DatabaseDeletedDuringRun_PartialNamed(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "a first copy from PouchDB Server reads every document in its feed: nothing read after it can fail")
	ctx := t.Context()
	src, dst := couchtest.Start(t), couchtest.Start(t)
	seed(t, src, "keep", 3)
	seed(t, src, "gone", 1200) // three batches of 500
	hold := faultproxy.Rule{Name: "hold", Method: "POST", Path: `^/gone/_bulk_get$`, After: 1, Times: 1, Delay: 5 * time.Second, Fault: faultproxy.Forward}
	tc := couchtest.NewClient(dst.URL)
	written := func(p *faultproxy.Proxy) bool { // the held batch waits; another one reached the target
		var info struct {
			DocCount int `json:"doc_count"`
		}
		return p.Rule(hold.Name).Matched > 0 && tc.GetJSON(ctx, "/gone", &info) == nil && info.DocCount > 0
	}
	sum, err := deleteGoneWhen(t, src, hold, written, func(from *sofa.Endpoint) (*sofa.Summary, error) {
		return sofa.Copy(ctx, from, openAt(t, dst.URL, nil), sofa.CopyOptions{Selection: sofa.Selection{Include: []string{"keep", "gone"}}})
	})
	if err != nil || !sum.Complete() || len(sum.LeftOut) != 1 {
		t.Fatalf("run: %v, left out %+v", err, sum.LeftOut)
	}
	if r := sum.LeftOut[0].Reason; !strings.HasPrefix(r, "deleted at the source during the run; the ") || !strings.Contains(r, "revisions written before stay on the target, a partial copy") {
		t.Errorf("left out because %q, want the partial copy named", r)
	}
}
