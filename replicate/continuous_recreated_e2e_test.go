package replicate_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa/replicate"
)

// TestContinuous_SourceRecreated: a source database deleted and created
// again while a continuous run follows it (with fewer changes than the
// old one had: on PouchDB Server its seqs start again below the seq the
// run had reached) has its new documents copied, and the run warns that
// it reads the new database from the beginning.
func TestContinuous_SourceRecreated(t *testing.T) {
	srv, src, tgt, sdb, tdb := pair(t)
	localLoad(t, srv, src, 0, 40)
	var mu sync.Mutex
	var warnings []string
	f := follow(t, sdb, tdb, replicate.Options{FlushInterval: 50 * time.Millisecond, Heartbeat: 200 * time.Millisecond, Warn: func(s string) {
		mu.Lock()
		warnings = append(warnings, s)
		mu.Unlock()
	}})
	waitEqual(t, srv, src, tgt, f)
	c := srv.Client()
	ctx := t.Context()
	if err := c.DeleteDB(ctx, src); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateDB(ctx, src); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		if _, err := c.PutDoc(ctx, src, id, map[string]any{"new": true}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		f.alive(t)
		var got map[string]any
		if err := c.GetJSON(ctx, "/"+tgt+"/n3", &got); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the recreated source's documents never reached the target")
		}
		select {
		case <-f.done:
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, id := range []string{"n1", "n2"} {
		var got map[string]any
		if err := c.GetJSON(ctx, "/"+tgt+"/"+id, &got); err != nil {
			t.Errorf("%s of the recreated source is not on the target: %v", id, err)
		}
	}
	f.stop(t)
	mu.Lock()
	defer mu.Unlock()
	if w := strings.Join(warnings, "\n"); !strings.Contains(w, "deleted and created again while followed") {
		t.Errorf("warnings %q, want one that the source was recreated", warnings)
	}
}
