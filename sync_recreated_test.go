package sofa_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// TestSync_DeleteMissingRecreatedDuringFirstCopy (found by a new user on
// CouchDB 3.5, 2 runs in 20: a database created on the source during a
// continuous run, deleted and created again 0.7 s later, kept the old
// database's documents on the target): its first copy, having written
// part of the old database, found it gone ("not found") when the source
// already held the new one, so it failed instead of reporting a
// deletion; with DeleteMissing, the next copy must delete the target's
// copy of the old database before copying the new one, as it does for a
// database seen deleted after a copy.
func TestSync_DeleteMissingRecreatedDuringFirstCopy(t *testing.T) {
	ctx := context.Background()
	a, b := couchtest.Start(t), couchtest.Start(t)
	if a.Kind != couchtest.CouchDB {
		t.Skip("the deletion is told by a _db_updates row: CouchDB")
	}
	seed(t, a, "keep", 1)
	enableDBUpdates(t, a)
	p := faultproxy.StartT(t, a.URL) // the source, where s1's reads are held
	noted := make(chan struct{})
	var once sync.Once
	o := sofa.SyncOptions{DeleteMissing: true}
	o.Copy.DebugLogf = func(format string, args ...any) {
		if strings.HasPrefix(fmt.Sprintf(format, args...), "s1: deleted on the source while it is copied") {
			once.Do(func() { close(noted) })
		}
	}
	r := startSync(t, p.URL, b.URL, o)
	r.wait("the initial copy", func() bool { return r.caughtUp })
	// s1, created during the run, hidden from it (503) until it holds
	// its documents; then its first copy reads one batch (and writes
	// it), and its further reads are answered 503 (retried)
	hide := faultproxy.Rule{Name: "hide-s1", Path: `^/(s1(/.*)?|_dbs_info)$`, Fault: faultproxy.Status, Status: 503}
	if err := p.SetRules(hide); err != nil {
		t.Fatal(err)
	}
	ca, cb := couchtest.NewClient(a.URL), couchtest.NewClient(b.URL)
	if err := ca.CreateDB(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	var docs []json.RawMessage
	for i := range 1500 {
		docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"old%04d","n":%d}`, i, i)))
	}
	if _, err := ca.BulkDocs(ctx, "s1", true, docs...); err != nil {
		t.Fatal(err)
	}
	stall := faultproxy.Rule{Name: "stall-s1", Method: "POST", Path: `^/s1/_bulk_get$`, After: 1, Fault: faultproxy.Status, Status: 503}
	if err := p.SetRules(stall); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitTimeout)
	for {
		var info struct {
			DocCount int `json:"doc_count"`
		}
		if _, err := cb.Do(ctx, "GET", "/s1", nil, &info); err == nil && info.DocCount > 0 && p.Rule(stall.Name).Fired > 0 {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("s1's first copy never wrote part of it")
		}
	}
	// deleted and created again while the copy waits on its reads, which
	// then find the old database gone
	if err := ca.DeleteDB(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-noted:
	case <-time.After(waitTimeout):
		t.Fatal("the run never noted s1's deletion during its copy")
	}
	if err := ca.CreateDB(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.PutDoc(ctx, "s1", "fresh", map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	var failed int // the copies of s1 failed so far (while hidden, say)
	r.wait("the count of s1's failed copies", func() bool { failed = r.failed["s1"]; return true })
	gone := faultproxy.Rule{Name: "s1-read-gone", Method: "POST", Path: `^/s1/_bulk_get$`, Fault: faultproxy.Status, Status: 404,
		Body: `{"error":"not_found","reason":"Database does not exist."}`}
	if err := p.SetRules(gone); err != nil {
		t.Fatal(err)
	}
	r.wait("s1's first copy failed", func() bool { return r.failed["s1"] > failed })
	if err := p.SetRules(); err != nil {
		t.Fatal(err)
	}
	r.waitEqual(a.URL, b.URL, "s1", "keep")
	sum, _ := r.stop()
	if !slices.Contains(sum.DeletedOnTarget, "s1") {
		t.Errorf("deleted on the target %v: want s1 (its old copy)", sum.DeletedOnTarget)
	}
}
