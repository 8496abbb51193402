package sofa_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestOpen_LeavesNoConnections: a database endpoint opened and closed,
// and an Open that fails after its probes, leave no HTTP connection
// behind (each kept one until the idle timeout, 90 s: two goroutines
// each, 40 after twenty of each).
func TestOpen_LeavesNoConnections(t *testing.T) {
	srv := couchtest.Start(t)
	seed(t, srv, "plain", 1)
	ctx := t.Context()
	// warm up what stays for the process (the test server's own client)
	if ep, err := sofa.Open(ctx, srv.URL, sofa.OpenOptions{}); err == nil {
		ep.Close()
	}
	settle := func(limit int) int {
		deadline := time.Now().Add(30 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= limit || time.Now().After(deadline) {
				return n
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	base := runtime.NumGoroutine()
	for range 20 {
		ep, err := sofa.Open(ctx, srv.URL+"/plain", sofa.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ep.Close()
		if ep, err := sofa.Open(ctx, srv.URL+"/_utils", sofa.OpenOptions{}); err == nil {
			ep.Close() // a server that takes it for a database: nothing to count
		}
	}
	if n := settle(base + 4); n > base+4 {
		t.Errorf("%d goroutines after 20 database endpoints opened and closed and 20 failed Opens, %d before: connections left open", n, base)
	}
}
