package sofa_test

import (
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
	ctx := t.Context()
	src, dst := couchtest.Start(t), couchtest.Start(t)
	seed(t, src, "keep", 3)
	seed(t, src, "gone", 3)
	p := faultproxy.StartT(t, src.URL)
	hold := faultproxy.Rule{Name: "hold", Method: "GET", Path: `^/gone/_changes$`, Times: 1, Delay: 3 * time.Second, Fault: faultproxy.Forward}
	if err := p.SetRules(hold); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var sum *sofa.Summary
	var err error
	go func() {
		defer close(done)
		sum, err = sofa.Copy(ctx, openAt(t, p.URL, nil), openAt(t, dst.URL, nil), sofa.CopyOptions{Selection: sofa.Selection{Include: []string{"keep", "gone"}}})
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for p.Rule(hold.Name).Matched == 0 {
		select {
		case <-done:
			t.Fatalf("the copy ended before it read gone's feed: %+v, %v", sum, err)
		case <-tick.C:
		}
	}
	if _, err := couchtest.NewClient(src.URL).Do(ctx, "DELETE", "/gone", nil, nil); err != nil {
		t.Fatal(err)
	}
	<-done
	if err != nil || !sum.Complete() || sum.DBsTotal != 1 {
		t.Fatalf("copy: %v, databases %+v; want keep copied, complete", err, sum.DBs)
	}
	if len(sum.LeftOut) != 1 || sum.LeftOut[0].Name != "gone" || sum.LeftOut[0].Reason != "deleted at the source during the run" {
		t.Errorf("left out: %+v, want gone, deleted at the source during the run", sum.LeftOut)
	}
	assertSame(t, src, dst, "keep")
}
