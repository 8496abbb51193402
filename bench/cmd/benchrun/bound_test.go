package main

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestCostsChargesEachKindAtItsRate(t *testing.T) {
	counts := map[string]int64{
		"PUT /db":             1000,
		"POST /db/_revs_diff": 500, // frequent but never measured
		"GET /":               1,   // rare
		"GET /db":             1000,
	}
	rates := map[string]float64{"PUT /db": 500, "GET /db": 2000, "GET /": 1}
	rows, total, err := costs("target", counts, rates, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		of   string
		secs float64
	}{
		"PUT /db":             {"PUT /db", 2},
		"GET /db":             {"GET /db", 0.5},
		"POST /db/_revs_diff": {"GET /db", 0.25},
		"GET /":               {"GET /db", 0.0005}, // its own rate is ignored: rare
	}
	if len(rows) != len(want) {
		t.Fatalf("rows = %+v", rows)
	}
	for _, r := range rows {
		w := want[r.Kind]
		if r.RateOf != w.of || math.Abs(r.Secs-w.secs) > 1e-9 || r.Server != "target" {
			t.Errorf("%s: rate of %q, %g s; want %q, %g s", r.Kind, r.RateOf, r.Secs, w.of, w.secs)
		}
	}
	if math.Abs(total-2.7505) > 1e-9 {
		t.Errorf("total = %g s, want 2.7505", total)
	}
	if rows[0].Count < rows[len(rows)-1].Count {
		t.Errorf("rows not in descending count: %+v", rows)
	}
	if _, _, err := costs("source", map[string]int64{"GET /": 1}, map[string]float64{}, 100); err == nil {
		t.Error("a kind with no rate to charge was accepted")
	}
}

func TestRequestRateCapsAndFails(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/bad" {
			http.Error(w, "no", http.StatusConflict)
			return
		}
		w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	ctx := context.Background()
	rate, done, err := requestRate(ctx, 4, 10*time.Second, 25, func(ctx context.Context, i int) (*http.Request, error) {
		return newRequest(ctx, http.MethodPut, srv.URL+"/db", []byte(`{}`))
	})
	if err != nil || done != 25 || hits.Load() != 25 || rate <= 0 {
		t.Errorf("capped run: rate %g done %d hits %d err %v; want 25 requests", rate, done, hits.Load(), err)
	}
	_, _, err = requestRate(ctx, 4, 10*time.Second, 50, func(ctx context.Context, i int) (*http.Request, error) {
		path := "/db"
		if i == 7 {
			path = "/bad"
		}
		return newRequest(ctx, http.MethodGet, srv.URL+path, nil)
	})
	if err == nil || !strings.Contains(err.Error(), "HTTP 409") {
		t.Errorf("a 409 answer gave err %v", err)
	}
	// Uncapped: stops at the deadline.
	t0 := time.Now()
	_, done, err = requestRate(ctx, 2, 100*time.Millisecond, 0, func(ctx context.Context, i int) (*http.Request, error) {
		return newRequest(ctx, http.MethodGet, srv.URL+"/db", nil)
	})
	if err != nil || done == 0 || time.Since(t0) > 5*time.Second {
		t.Errorf("uncapped run: done %d err %v after %s", done, err, time.Since(t0))
	}
}

func TestBulkBodiesSplitOneDatabase(t *testing.T) {
	c := boundCase{docs: 100, docSize: 256}
	bodies, err := bulkBodies(c, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 2 {
		t.Fatalf("%d bodies, want 2", len(bodies))
	}
	ids := map[string]bool{}
	for _, b := range bodies {
		var req struct {
			NewEdits *bool `json:"new_edits"`
			Docs     []struct {
				ID        string          `json:"_id"`
				Rev       string          `json:"_rev"`
				Revisions json.RawMessage `json:"_revisions"`
			} `json:"docs"`
		}
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatalf("body is not JSON: %v", err)
		}
		if req.NewEdits == nil || *req.NewEdits || len(req.Docs) != 50 {
			t.Fatalf("new_edits %v, %d docs; want false, 50", req.NewEdits, len(req.Docs))
		}
		for _, d := range req.Docs {
			if d.Rev == "" || len(d.Revisions) == 0 || ids[d.ID] {
				t.Errorf("doc %q: rev %q revisions %s (or a repeated id)", d.ID, d.Rev, d.Revisions)
			}
			ids[d.ID] = true
		}
	}
	if len(bodies[0]) < 50*256 {
		t.Errorf("body of %d bytes for 50 docs of 256 B", len(bodies[0]))
	}
}

func TestSofaKinds(t *testing.T) {
	o := &outcome{Stdout: []byte("{\n  \"dbs_total\": 2,\n  \"requests_by_kind\": {\"target\": {\"PUT /db\": 2}}\n}\n")}
	k, err := sofaKinds(o)
	if err != nil || k["target"]["PUT /db"] != 2 {
		t.Errorf("kinds = %v, %v", k, err)
	}
	if _, err := sofaKinds(&outcome{Stdout: []byte(`{"dbs_total":2}`)}); err == nil {
		t.Error("output without requests_by_kind was accepted")
	}
}

func TestMinimalBound(t *testing.T) {
	b := &bound{rates: map[string]map[string]float64{
		"source": {"GET /db": 500, "GET /db/_changes": 400},
		"target": {"PUT /db": 200, "POST /db/_bulk_docs": 100},
	}}
	// 1,000 dbs of 600 docs: target 1000/200 + 1000*2/100 = 25 s; source 1000/400 = 2.5 s
	nd, err := b.minimal(boundCase{nDBs: 1000, docs: 600}, false, 2)
	if err != nil || nd.ms != 25000 || nd.src != 2.5 || nd.tgt != 25 || nd.cpu != 0 {
		t.Errorf("minimal = %+v, %v; want 25000 ms (2.5, 25), no CPU", nd, err)
	}
	// with the properties: source also 1000/500 + 1000/250 = 6 s more
	if _, err := b.minimal(boundCase{nDBs: 1000, docs: 600}, true, 2); err == nil {
		t.Errorf("no error without a _security rate")
	}
	b.rates["source"]["GET /db/_security"] = 500
	b.rates["source"]["GET /db/_revs_limit"] = 250
	nd, err = b.minimal(boundCase{nDBs: 1000, docs: 100}, true, 2)
	if err != nil || nd.ms != 15000 || nd.src != 8.5 || nd.tgt != 15 {
		t.Errorf("minimal with properties = %+v, %v; want 15000 ms (8.5, 15)", nd, err)
	}
	// CPU per request known for every kind charged: the two servers'
	// CPU, 1000*(10+20) + 1000*(1+2+3) ms = 36 CPU-s, is 18 s of 2 cores,
	// above either server alone.
	b.cpuMS = map[string]map[string]float64{
		"source": {"GET /db/_changes": 1, "GET /db/_security": 2, "GET /db/_revs_limit": 3},
		"target": {"PUT /db": 10, "POST /db/_bulk_docs": 20},
	}
	nd, err = b.minimal(boundCase{nDBs: 1000, docs: 100}, true, 2)
	if err != nil || nd.ms != 18000 || nd.cpu != 36 {
		t.Errorf("minimal with CPU = %+v, %v; want 18000 ms, 36 CPU-s", nd, err)
	}
	b.rates["target"]["PUT /db"] = 0
	if _, err := b.minimal(boundCase{nDBs: 1, docs: 1}, false, 2); err == nil {
		t.Errorf("no error without a PUT /db rate")
	}
}
