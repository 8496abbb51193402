package sofa_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// Endpoint.Close releases the idle connections a finished run keeps
// (each with its goroutines), rather than leaving them for 90 s; the
// endpoint stays usable.
func TestEndpoint_CloseReleasesConnections(t *testing.T) {
	ctx := t.Context()
	srv, tsrv := couchtest.Start(t), couchtest.Start(t)
	if err := srv.Client().CreateDB(ctx, "ec-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client().PutDoc(ctx, "ec-a", "d", map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	src, err := sofa.Open(ctx, srv.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dst, err := sofa.Open(ctx, tsrv.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sofa.Copy(ctx, src, dst, sofa.CopyOptions{Selection: sofa.Selection{Include: []string{"ec-*"}}}); err != nil {
		t.Fatal(err)
	}
	held := runtime.NumGoroutine()
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second) // far below the transport's own 90 s
	for runtime.NumGoroutine() > before+2 {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines: %d before, %d after the copy, %d after Close: the connections stay", before, held, runtime.NumGoroutine())
		}
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := sofa.Copy(ctx, src, dst, sofa.CopyOptions{Selection: sofa.Selection{Include: []string{"ec-*"}}}); err != nil {
		t.Errorf("copy after Close: %v", err)
	}
}
