package couch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/replicate"
)

// InfoBatched against a real server: on CouchDB the calls made while a
// `_dbs_info` request is in flight go out together in the next one (41
// databases, one of them missing, in 2 requests, and one GET /db that
// confirms the missing one); on PouchDB
// Server, which has no `_dbs_info` (404), every call falls back to
// GET /db after one probe. Either way each database gets its own counts
// and the missing one replicate.ErrNotFound.
func TestInfoBatched(t *testing.T) {
	srv := couchtest.Start(t)
	c := srv.Client()
	ctx := t.Context()
	const n = 40
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("info-%02d", i)
		if err := c.CreateDB(ctx, names[i]); err != nil {
			t.Fatal(err)
		}
		var docs []json.RawMessage
		for j := range i % 5 {
			docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"d%d"}`, j)))
		}
		if len(docs) > 0 {
			if _, err := c.BulkDocs(ctx, names[i], true, docs...); err != nil {
				t.Fatal(err)
			}
		}
	}

	// A proxy that counts requests and holds the first _dbs_info until
	// released, so that the other calls queue behind it.
	target, _ := url.Parse(srv.AdminURL())
	user := target.User
	target.User = nil
	arrived, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	counts := map[string]int{}
	// batches: the keys of each POST /_dbs_info, in arrival order. A
	// request sofa sent again (after a 502 from a stale proxy connection
	// on a loaded machine) repeats a batch; what matters is which names
	// went together.
	var batches [][]string
	var once sync.Once
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := r.Method + " " + requestKind(r.URL.EscapedPath())
		mu.Lock()
		counts[kind]++
		mu.Unlock()
		if kind == "POST /_dbs_info" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			var req struct {
				Keys []string `json:"keys"`
			}
			_ = json.Unmarshal(body, &req)
			mu.Lock()
			batches = append(batches, req.Keys)
			mu.Unlock()
			once.Do(func() { close(arrived); <-release })
		}
		if user != nil {
			pw, _ := user.Password()
			r.SetBasicAuth(user.Username(), pw)
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	ep, err := Probe(ctx, proxy.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := ep.Server

	type res struct {
		info replicate.DBInfo
		err  error
	}
	all := append(append([]string{}, names...), "info-missing")
	out := make([]res, len(all))
	var wg sync.WaitGroup
	call := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].info, out[i].err = s.DB(all[i]).InfoBatched(ctx)
		}()
	}
	call(0)
	<-arrived
	for i := 1; i < len(all); i++ {
		call(i)
	}
	// Release the first request once every other call is queued (on
	// PouchDB Server they queue too: the probe has not answered yet).
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.infoB.mu.Lock()
		q := len(s.infoB.queue)
		s.infoB.mu.Unlock()
		if q == len(all)-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued, want %d", q, len(all)-1)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()

	for i, name := range names {
		if out[i].err != nil {
			t.Errorf("%s: %v", name, out[i].err)
			continue
		}
		if got := out[i].info; got.Name != name || got.DocCount != int64(i%5) {
			t.Errorf("%s: name %q doc_count %d, want %d", name, got.Name, got.DocCount, i%5)
		}
	}
	if err := out[n].err; !errors.Is(err, replicate.ErrNotFound) {
		t.Errorf("missing database: %v, want ErrNotFound", err)
	}
	snapshot := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		m := map[string]int{}
		for k, v := range counts {
			m[k] = v
		}
		return m
	}
	got := snapshot()
	t.Logf("%s: requests %v", srv.Kind, got)
	switch srv.Kind {
	case couchtest.CouchDB:
		// Two batches: the first call alone, then the 40 queued behind
		// it in one request.
		mu.Lock()
		seen := map[string]bool{}
		for _, b := range batches {
			b = slices.Clone(b)
			slices.Sort(b)
			seen[strings.Join(b, ",")] = true
		}
		mu.Unlock()
		rest := slices.Clone(all[1:])
		slices.Sort(rest)
		first, queued := all[0], strings.Join(rest, ",")
		if len(seen) != 2 || !seen[first] || !seen[queued] {
			t.Errorf("_dbs_info batches %q: want [%s] alone, then the 40 queued calls in one request", batches, first)
		}
		// one GET /db: the missing database, whose not_found row is
		// confirmed (CouchDB answers not_found for existing databases it
		// cannot open under max_dbs_open pressure)
		if got["GET /db"] != 1 {
			t.Errorf("GET /db x%d: want 1 (the missing database confirmed)", got["GET /db"])
		}
	default:
		if got["POST /_dbs_info"] != 1 || got["GET /db"] != len(all) {
			t.Errorf("POST /_dbs_info x%d, GET /db x%d: want 1 and %d (no _dbs_info: GET /db each)", got["POST /_dbs_info"], got["GET /db"], len(all))
		}
		// Later calls go straight to GET /db.
		if _, err := s.DB(names[0]).InfoBatched(context.Background()); err != nil {
			t.Fatal(err)
		}
		if snapshot()["POST /_dbs_info"] != 1 {
			t.Errorf("_dbs_info asked again after the server refused it")
		}
	}
}

// CouchDB 3 keeps _dbs_info for admins ([chttpd] admin_only_all_dbs)
// while a user may read a database's info with GET /db: InfoBatched as
// such a user falls back to GET /db instead of failing.
func TestInfoBatchedAdminOnly(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "_dbs_info is admin-only on CouchDB 3; PouchDB Server has none")
	srv := couchtest.StartWith(t, couchtest.Options{Users: map[string]string{"reader": "pw"}})
	c := srv.Client()
	ctx := t.Context()
	if err := c.CreateDB(ctx, "pub"); err != nil {
		t.Fatal(err)
	}
	if err := c.PutSecurity(ctx, "pub", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BulkDocs(ctx, "pub", true, json.RawMessage(`{"_id":"a"}`), json.RawMessage(`{"_id":"b"}`)); err != nil {
		t.Fatal(err)
	}
	ep, err := Probe(ctx, srv.UserURL("reader", "pw"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := ep.Server.DB("pub").InfoBatched(ctx)
	if err != nil {
		t.Fatalf("InfoBatched as a non-admin: %v", err)
	}
	if info.DocCount != 2 {
		t.Errorf("doc_count %d, want 2", info.DocCount)
	}
}
