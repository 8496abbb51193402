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
	ms, src, tgt, err := b.minimal(boundCase{nDBs: 1000, docs: 600})
	if err != nil || ms != 25000 || src != 2.5 || tgt != 25 {
		t.Errorf("minimal = %d ms (source %g, target %g), %v; want 25000 (2.5, 25)", ms, src, tgt, err)
	}
	b.rates["target"]["PUT /db"] = 0
	if _, _, _, err := b.minimal(boundCase{nDBs: 1, docs: 1}); err == nil {
		t.Errorf("no error without a PUT /db rate")
	}
}
