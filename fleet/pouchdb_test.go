package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/limit"
)

// httpLister is a minimal net/http Lister for tests (the couch client is
// the real one).
type httpLister struct {
	c    *http.Client
	base string
}

func (h httpLister) AllDBs(ctx context.Context, startAfter string, n int) ([]string, error) {
	q := url.Values{}
	if startAfter != "" {
		k, _ := json.Marshal(startAfter)
		q.Set("startkey", string(k))
	}
	if n > 0 {
		q.Set("limit", fmt.Sprint(n))
	}
	req, err := http.NewRequestWithContext(ctx, "GET", h.base+"/_all_dbs?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := h.c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("_all_dbs: status %d", resp.StatusCode)
	}
	var out []string
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// capacityProxy forwards to a real server but answers 429 at once to any
// request beyond k in flight, and adds delay to the others (a server with
// k request slots and a network round trip).
type capacityProxy struct {
	k        int64
	delay    time.Duration
	rp       *httputil.ReverseProxy
	inFlight atomic.Int64
	served   atomic.Int64
	rejected atomic.Int64
}

func (p *capacityProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.inFlight.Add(1) > p.k {
		p.inFlight.Add(-1)
		p.rejected.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":"too_many_requests","reason":"over capacity"}`)
		return
	}
	defer p.inFlight.Add(-1)
	time.Sleep(p.delay)
	p.rp.ServeHTTP(w, r)
	p.served.Add(1)
}

const (
	proxyK     = 16
	docsPerDB  = 60
	dbsInTest  = 30
	dbWorkers  = 3
	proxyDelay = 30 * time.Millisecond
)

// fixture is a PouchDB Server holding dbsInTest databases of docsPerDB
// documents each.
type fixture struct {
	srv *couchtest.Server
	dbs []string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := couchtest.Start(t)
	c := srv.Client()
	ctx := t.Context()
	f := &fixture{srv: srv}
	for i := range dbsInTest {
		db := fmt.Sprintf("fleet-%02d", i)
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		docs := make([]json.RawMessage, docsPerDB)
		for j := range docs {
			docs[j] = json.RawMessage(fmt.Sprintf(`{"_id":"doc-%03d","n":%d}`, j, j))
		}
		if _, err := c.BulkDocs(ctx, db, true, docs...); err != nil {
			t.Fatal(err)
		}
		f.dbs = append(f.dbs, db)
	}
	return f
}

// result of one workload run through the proxy.
type loadResult struct {
	dur      time.Duration
	served   int64
	rejected int64
	limits   []int // the limit every 10 ms
	sum      Summary
}

// runLoad copies nothing: every job reads each document of its database
// once (dbWorkers at a time), through l, retrying 429s with backoff.
func (f *fixture) runLoad(t *testing.T, l *limit.Limiter) loadResult {
	t.Helper()
	target := mustURL(t, f.srv.URL)
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
			if u := target.User; u != nil {
				// The server's URL carries its admin's credentials
				// (CouchDB): the proxy sends them as basic auth, as a
				// client would.
				pw, _ := u.Password()
				r.Out.SetBasicAuth(u.Username(), pw)
			}
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 128},
	}
	px := &capacityProxy{k: proxyK, delay: proxyDelay, rp: rp}
	hs := httptest.NewServer(px)
	defer hs.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}, Timeout: 30 * time.Second}
	bo := limit.Backoff{Base: 10 * time.Millisecond, Max: time.Second, Total: 30 * time.Second}

	get := func(ctx context.Context, path string) error {
		start := time.Now()
		for attempt := 0; ; attempt++ {
			tok, err := l.Acquire(ctx)
			if err != nil {
				return err
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+path, nil)
			t0 := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				tok.Done(limit.Outcome{Err: err})
				return err
			}
			lat := time.Since(t0)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ra, _ := limit.RetryAfter(resp.Header, time.Now())
			tok.Done(limit.Outcome{Status: resp.StatusCode, Latency: lat, RetryAfter: ra})
			if resp.StatusCode == 200 {
				return nil
			}
			if !limit.OverloadStatus(resp.StatusCode) {
				return fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
			}
			d, ok := bo.Delay(attempt, time.Since(start), ra)
			if !ok {
				return fmt.Errorf("GET %s: still overloaded after %s", path, time.Since(start))
			}
			if err := limit.Sleep(ctx, d); err != nil {
				return err
			}
		}
	}
	job := func(ctx context.Context, db string, p DBProgress) (DBResult, error) {
		ids := make(chan int, docsPerDB)
		for i := range docsPerDB {
			ids <- i
		}
		close(ids)
		var wg sync.WaitGroup
		var firstErr atomic.Value
		for range dbWorkers {
			wg.Go(func() {
				for i := range ids {
					if err := get(ctx, fmt.Sprintf("/%s/doc-%03d", db, i)); err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					p.AddDocsRead(1)
				}
			})
		}
		wg.Wait()
		if err, _ := firstErr.Load().(error); err != nil {
			return DBResult{}, err
		}
		return DBResult{DocsRead: docsPerDB}, nil
	}

	var limits []int
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				limits = append(limits, l.Limit())
			}
		}
	}()
	start := time.Now()
	sum, err := Run(t.Context(), f.dbs, job, Options{Limiters: []Limiter{l}, MaxDBs: 64, Fixed: l.Stats().Fixed})
	dur := time.Since(start)
	close(stop)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Complete() {
		for _, r := range sum.DBs {
			if r.Status != StatusOK {
				t.Errorf("%s: %s %s", r.Name, r.Status, r.Error)
			}
		}
		t.FailNow()
	}
	return loadResult{dur: dur, served: px.served.Load(), rejected: px.rejected.Load(), limits: limits, sum: sum}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestListDBs_PouchDBServer(t *testing.T) {
	f := newFixture(t)
	got, err := ListDBs(t.Context(), httpLister{c: http.DefaultClient, base: f.srv.URL}, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, db := range f.dbs {
		if !slices.Contains(got, db) {
			t.Errorf("ListDBs lacks %s (got %v)", db, got)
		}
	}
	if kept := (Filter{Include: []string{"fleet-1*"}, Skip: ReplicateSkip}).Apply(got); len(kept) != 10 {
		t.Errorf("filter kept %v, want fleet-10..fleet-19", kept)
	}
}

// TestRun_AdaptiveAgainst429Proxy is issue item 6: the test server behind
// a proxy that answers 429 above K requests in flight. The run completes;
// over its second half the median limit lies in [0.7K, K]; under 2% of
// requests are rejected. The latency signal is off here: on a loaded
// machine (CI runs packages in parallel) PouchDB's own latency swings
// would move the limit for reasons that are not the server's capacity;
// latency decisions have their own deterministic tests (synctest). The
// throughput against fixed settings (item 7b) is a speed target, measured
// by the controller benchmark (scripts/bench.sh controller), only logged
// here.
func TestRun_AdaptiveAgainst429Proxy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PouchDB Server")
	}
	f := newFixture(t)
	adaptive := f.runLoad(t, limit.New(limit.Options{Name: "proxy", Max: 64, LatencyTolerance: -1}))
	med := median(adaptive.limits[len(adaptive.limits)/2:])
	t.Logf("adaptive: %s, %d served, %d rejected, median limit %d over the second half, peak dbs %d",
		adaptive.dur, adaptive.served, adaptive.rejected, med, adaptive.sum.Concurrency.Peak)
	if lo := proxyK * 7 / 10; med < lo || med > proxyK {
		t.Errorf("median limit over the second half = %d, want in [%d, %d]", med, lo, proxyK)
	}
	if frac := float64(adaptive.rejected) / float64(adaptive.served+adaptive.rejected); frac >= 0.02 {
		t.Errorf("%.2f%% of requests rejected, want < 2%%", 100*frac)
	}
	best := time.Duration(1<<63 - 1)
	for _, n := range []int{proxyK * 3 / 4, proxyK} {
		r := f.runLoad(t, limit.New(limit.Options{Name: "proxy", Max: n, Fixed: true}))
		t.Logf("fixed %d: %s, %d rejected", n, r.dur, r.rejected)
		best = min(best, r.dur)
	}
	t.Logf("adaptive throughput = %.2f of the best fixed setting (the benchmark checks >= 0.85)", float64(best)/float64(adaptive.dur))
	b, _ := json.Marshal(adaptive.sum.Hosts)
	if len(adaptive.sum.Hosts) != 1 || adaptive.sum.Hosts[0].Overloads != adaptive.rejected {
		t.Errorf("summary hosts = %s", b)
	}
}

func median(xs []int) int {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
