package sofa_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/storage"
)

// TestRestore_OptionErrorStopsListing: a whole-server restore lists the
// target's databases while it reads the archive; when the options turn
// out wrong (a --rename of a database the archive lacks) it returns that
// error at once, stopping a listing that has not answered (here: held an
// hour by the proxy) instead of waiting for it, and logs nothing about it.
func TestRestore_OptionErrorStopsListing(t *testing.T) {
	srv := couchtest.Start(t)
	px := faultproxy.StartT(t, srv.URL)
	if err := px.SetRules(faultproxy.Rule{Name: "slow-listing", Method: "GET", Path: `^/_all_dbs$`, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	st := &storage.Memory{}
	exampleArchive(st, "a.sofa", 3)
	ar, err := sofa.Open(ctx, "a.sofa", sofa.OpenOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	dst, err := sofa.Open(ctx, px.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var log logLines
	p, err := sofa.PlanRestore(ctx, []*sofa.Endpoint{ar}, sofa.RestoreOptions{
		Renames: map[string]string{"nosuch": "x"}, RunControl: sofa.RunControl{Logf: log.logf}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.Run(ctx, dst)
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(time.Minute): // a held request's attempt lasts 90 s
		t.Fatal("the restore is still waiting for the target's listing after its option error")
	}
	if err == nil || !strings.Contains(err.Error(), `no database "nosuch"`) {
		t.Fatalf("want the --rename error, got %v", err)
	}
	for _, l := range log.lines() {
		if strings.Contains(l, "list databases") {
			t.Errorf("a stopped listing was logged: %s", l)
		}
	}
}

// logLines collects what a run logs (RunControl.Logf), safe for the
// run's goroutines.
type logLines struct {
	mu     sync.Mutex
	logged []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.logged = append(l.logged, fmt.Sprintf(format, args...))
}

// lines returns a copy of the lines logged so far.
func (l *logLines) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.logged...)
}
