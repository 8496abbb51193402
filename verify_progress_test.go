package sofa_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// recorder is a sofa.Progress that records what it was told.
type recorder struct {
	mu    sync.Mutex
	total int
	begun []string
	ended []string
}

func (r *recorder) Start(dbs int, _ func(bool) string) { r.total = dbs }
func (r *recorder) Begin(db string) sofa.DBProgress {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.begun = append(r.begun, db)
	return sofa.NoProgress.Begin(db)
}
func (r *recorder) End(db string, _ sofa.DBProgress, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !failed {
		r.ended = append(r.ended, db)
	}
}

// TestVerify_Progress: a comparison of two servers reports its progress
// through VerifyOptions' RunControl, as Copy does: the databases
// selected, each begun and ended.
func TestVerify_Progress(t *testing.T) {
	ctx := context.Background()
	srv := couchtest.Start(t)
	seed(t, srv, "p1", 2)
	seed(t, srv, "p2", 1)
	open := func() *sofa.Endpoint {
		ep, err := sofa.Open(ctx, srv.URL, sofa.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ep
	}
	rec := &recorder{}
	res, err := sofa.Verify(ctx, open(), open(), sofa.VerifyOptions{Selection: sofa.Selection{Include: []string{"p*"}},
		RunControl: sofa.RunControl{MaxDBs: 1, Progress: rec}})
	if err != nil || !res.Equal || res.DBsTotal != 2 {
		t.Fatalf("verify: %+v, %v", res, err)
	}
	slices.Sort(rec.begun)
	slices.Sort(rec.ended)
	if want := []string{"p1", "p2"}; rec.total != 2 || !slices.Equal(rec.begun, want) || !slices.Equal(rec.ended, want) {
		t.Errorf("progress: total %d, begun %v, ended %v; want 2, %v, %v", rec.total, rec.begun, rec.ended, want, want)
	}
}
