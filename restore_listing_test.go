package sofa_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/fleet"
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
	ctx := t.Context()
	_, _, ar, dst := heldListing(t, couchtest.Start(t), 3)
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

// TestRestore_DoesNotWaitForTheListing: a whole-server restore does not
// wait for the target's listing before it writes: while the listing is
// held (an hour, by the proxy), a database the target lacks is created
// and restored, and one the target holds with other documents is still
// refused (its create answers 412, and it is judged as any existing
// database), with nothing written into it.
func TestRestore_DoesNotWaitForTheListing(t *testing.T) {
	srv := couchtest.Start(t)
	c := srv.Client()
	ctx := t.Context()
	// "users" exists on the target with a document of its own
	if err := c.CreateDB(ctx, "users"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(ctx, "users", "theirs", map[string]any{"x": 1}); err != nil {
		t.Fatal(err)
	}
	px, held, ar, dst := heldListing(t, srv, 30)
	var log logLines
	p, err := sofa.PlanRestore(ctx, []*sofa.Endpoint{ar}, sofa.RestoreOptions{RunControl: sofa.RunControl{Logf: log.logf}})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		sum *sofa.Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := p.Run(ctx, dst)
		done <- result{sum, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(time.Minute): // a held request's attempt lasts 90 s
		t.Fatal("the restore is still waiting for the target's listing")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	if px.Rule("slow-listing").Matched == 0 {
		t.Error("the restore did not list the target (the case is not tested)")
	}
	got := map[string]fleet.DBResult{}
	for _, d := range res.sum.DBs {
		got[d.Name] = d
	}
	if d := got["orders"]; d.Status != fleet.StatusOK || d.DocsWritten != 30 {
		t.Errorf("orders: %s, %d written (%s), want ok with 30", d.Status, d.DocsWritten, d.Error)
	}
	if d := got["users"]; d.Status != fleet.StatusFailed || !strings.Contains(d.Error, "not empty") || !strings.Contains(d.Error, "--replace deletes it") {
		t.Errorf("users (held other documents): %s %q, want failed: not empty", d.Status, d.Error)
	}
	for db, want := range map[string]int{"orders": 30, "users": 1} {
		var info struct {
			DocCount int `json:"doc_count"`
		}
		if err := c.GetJSON(ctx, "/"+db, &info); err != nil {
			t.Fatal(err)
		}
		if info.DocCount != want {
			t.Errorf("target %s holds %d documents, want %d", db, info.DocCount, want)
		}
	}
	for _, l := range log.lines() {
		if strings.Contains(l, "list databases") {
			t.Errorf("the stopped listing was logged: %s", l)
		}
	}

	// Again, by a user whose creates are refused (401, as CouchDB answers
	// one who is not a server admin, whether or not the database exists):
	// "orders", restored above, is asked for after its refused create and
	// found up to date, not failed.
	if err := px.SetRules(held, faultproxy.Rule{Name: "no admin", Method: "PUT", Path: `^/[a-z][^/]*$`, Fault: faultproxy.Status, Status: 401,
		Body: `{"error":"unauthorized","reason":"You are not a server admin."}`}); err != nil {
		t.Fatal(err)
	}
	sum, err := p.Run(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range sum.DBs {
		if d.Name == "orders" && (d.Status != fleet.StatusOK || d.DocsWritten != 0) {
			t.Errorf("orders again, creates refused: %s, %d written (%s), want ok with none", d.Status, d.DocsWritten, d.Error)
		}
	}
	if px.Rule("no admin").Fired == 0 {
		t.Error("no create was refused (the case is not tested)")
	}
}

// heldListing opens an example archive (exampleArchive, docs documents)
// and the server srv behind a proxy whose rule held holds `GET /_all_dbs`
// an hour.
func heldListing(t *testing.T, srv *couchtest.Server, docs int) (px *faultproxy.Proxy, held faultproxy.Rule, ar, dst *sofa.Endpoint) {
	t.Helper()
	px = faultproxy.StartT(t, srv.URL)
	held = faultproxy.Rule{Name: "slow-listing", Method: "GET", Path: `^/_all_dbs$`, Delay: time.Hour}
	if err := px.SetRules(held); err != nil {
		t.Fatal(err)
	}
	st := &storage.Memory{}
	exampleArchive(st, "a.sofa", docs)
	ar, err := sofa.Open(t.Context(), "a.sofa", sofa.OpenOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	dst, err = sofa.Open(t.Context(), px.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return px, held, ar, dst
}
