package sofa_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/recproxy"
)

// CouchDB answers a request for a database it cannot open, because
// max_dbs_open databases are in use, with 500 {"error":"all_dbs_active"}.
// sofa takes it as the server saying "fewer at once" (the adaptive limiter
// lowers the host's concurrency and the request is retried, like a 429),
// never as a failed database: 200 databases copied whole-server between two
// servers with max_dbs_open = 20 end complete and equal.
func TestCopy_AllDBsActiveIsThrottle(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "all_dbs_active and max_dbs_open are CouchDB's")
	const dbs, docs = 200, 3
	cfg := map[string]string{"couchdb/max_dbs_open": "20"}
	a := couchtest.StartWith(t, couchtest.Options{Config: cfg})
	b := couchtest.StartWith(t, couchtest.Options{Config: cfg})
	ctx := context.Background()
	c := couchtest.NewClient(a.URL)
	for i := range dbs {
		db := fmt.Sprintf("db%03d", i)
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		var rows []json.RawMessage
		for j := range docs {
			rows = append(rows, json.RawMessage(fmt.Sprintf(`{"_id":"d%d","n":%d}`, j, j)))
		}
		if _, err := c.BulkDocs(ctx, db, true, rows...); err != nil {
			t.Fatal(err)
		}
	}
	// Recording proxies count the 500s each server answered.
	ra, rb := recproxy.Start(t, a.AdminURL()), recproxy.Start(t, b.AdminURL())
	// Retries are logged (shown with -v or on failure).
	oo := sofa.OpenOptions{Client: couch.Options{Log: t.Logf}}
	src, err := sofa.Open(ctx, ra.UserURL(a.AdminUser, a.AdminPassword), oo)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := sofa.Open(ctx, rb.UserURL(b.AdminUser, b.AdminPassword), oo)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := sofa.Copy(ctx, src, dst, sofa.CopyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var overloads int64
	for _, h := range sum.Hosts {
		overloads += h.Overloads
		t.Logf("host %s: limit %d..%d, %d requests, %d overloads, %d errors", h.Host, h.MinLimit, h.MaxLimit, h.Requests, h.Overloads, h.Errors)
	}
	t.Logf("%d of %d databases ok, %d failed, %d partial; %d docs written in %v", sum.DBsOK, sum.DBsTotal, sum.DBsFailed, sum.DBsPartial, sum.DocsWritten, sum.Duration)
	for _, r := range sum.DBs {
		if r.Status != "ok" {
			t.Errorf("database %s: %s: %s", r.Name, r.Status, r.Error)
		}
	}
	if !sum.Complete() || sum.DBsTotal != dbs || sum.DocsWritten != dbs*docs {
		t.Fatalf("copy: %d of %d ok, %d written; want all %d and %d", sum.DBsOK, sum.DBsTotal, sum.DocsWritten, dbs, dbs*docs)
	}
	var s500 int
	for _, rec := range []*recproxy.Proxy{ra, rb} {
		for _, e := range rec.Exchanges() {
			if e.Status == 500 {
				s500++
			}
		}
	}
	t.Logf("the servers answered 500 %d times; the limiters counted %d overloads", s500, overloads)
	if s500 > 0 && overloads == 0 {
		t.Errorf("the servers answered all_dbs_active (500) %d times and no limiter took it as overload", s500)
	}
	for i := range dbs {
		db := fmt.Sprintf("db%03d", i)
		couchtest.AssertEqual(t, a.URL+"/"+db, b.URL+"/"+db)
	}
}
