package replicate_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/replicate"
)

// TestContinuousLagBench (run only with SOFA_LAG_BENCH=1) measures, on CouchDB, the lag of a continuous
// replication as its users see it: a writer puts single documents into the
// source at a steady rate (SOFA_LAG_RATE writes/s, default 100, for
// SOFA_LAG_SECONDS, default 10); the lag of each document is the time from
// the acknowledgement of its PUT to its appearance in the target's
// continuous changes feed, both read by the benchmark, not by the
// replicator. It also counts the requests the replicator sends to the
// source (through a proxy) per 1,000 changes. Sub-benchmarks:
// sofa with the default 250 ms flush interval and with 50 ms, and CouchDB's
// own continuous replicator (POST /_replicate) on the same server.
//
//	SOFA_LAG_BENCH=1 SOFA_TEST_SERVER=couchdb go test ./replicate -run ContinuousLagBench -v
func TestContinuousLagBench(b *testing.T) {
	if os.Getenv("SOFA_LAG_BENCH") == "" {
		b.Skip("a benchmark: set SOFA_LAG_BENCH=1")
	}
	couchtest.RequireKind(b, couchtest.CouchDB, "compares with CouchDB's own replicator")
	rate := envInt("SOFA_LAG_RATE", 100)
	secs := envInt("SOFA_LAG_SECONDS", 10)
	run := func(b *testing.T, name string, start func(b *testing.T, srv *couchtest.Server, srcURL string, src, tgt string) (stop func())) {
		b.Run(name, func(b *testing.T) {
			{
				srv := couchtest.Shared(b)
				src, tgt := srv.NewDB(b), srv.NewDB(b)
				// Only the replicator's source traffic goes through the
				// proxy, which counts requests as they arrive (a
				// continuous feed is one request).
				px := faultproxy.StartT(b, srv.URL)
				stop := start(b, srv, px.URL, src, tgt)
				m := measureLag(b, srv, src, tgt, rate, secs, func() int { return int(px.Stats().Requests) })
				stop()
				b.Logf("%s at %d writes/s for %d s: lag p50 %v p99 %v max %v; %.0f source requests for %d changes; writer p50 %v p99 %v",
					name, rate, secs, m.p50, m.p99, m.max, m.srcReqs, m.n, m.wp50, m.wp99)
			}
		})
	}
	sofa := func(flush time.Duration) func(b *testing.T, srv *couchtest.Server, srcURL string, src, tgt string) func() {
		return func(b *testing.T, srv *couchtest.Server, srcURL string, src, tgt string) func() {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				sep, err := couch.Probe(ctx, withAdmin(srv, srcURL), couch.Options{})
				if err != nil {
					b.Error(err)
					return
				}
				tep, err := couch.Probe(ctx, srv.AdminURL(), couch.Options{})
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = replicate.Run(ctx, sep.Server.DB(src), tep.Server.DB(tgt),
					replicate.Options{Continuous: true, FlushInterval: flush})
			}()
			return func() { cancel(); <-done }
		}
	}
	run(b, "sofa-flush250ms", sofa(0))
	run(b, "sofa-flush50ms", sofa(50*time.Millisecond))
	run(b, "couchdb-replicator", func(b *testing.T, srv *couchtest.Server, srcURL string, src, tgt string) func() {
		var out struct {
			ID string `json:"_local_id"`
		}
		body := map[string]any{"source": srcURL + "/" + src, "target": srv.DBURL(tgt), "continuous": true}
		if err := srv.Client().PostJSON(b.Context(), "/_replicate", body, &out); err != nil {
			b.Fatal(err)
		}
		return func() {
			_ = srv.Client().PostJSON(context.Background(), "/_replicate", map[string]any{"replication_id": out.ID, "cancel": true}, nil)
		}
	})
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func withAdmin(srv *couchtest.Server, base string) string {
	u, _ := url.Parse(base)
	u.User = url.UserPassword(srv.AdminUser, srv.AdminPassword)
	return u.String()
}

type lagFigures struct {
	n                         int
	p50, p99, max, wp50, wp99 time.Duration
	srcReqs                   float64
}

// measureLag writes rate docs/s for secs seconds into src and waits until
// each is in tgt's changes feed.
func measureLag(b *testing.T, srv *couchtest.Server, src, tgt string, rate, secs int, srcRequests func() int) lagFigures {
	ctx, cancel := context.WithTimeout(b.Context(), time.Duration(secs)*time.Second+3*time.Minute)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	// The target's feed, read from now on.
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.DBURL(tgt)+"/_changes?feed=continuous&since=now&heartbeat=1000", nil)
	if u, _ := url.Parse(srv.AdminURL()); u.User != nil {
		p, _ := u.User.Password()
		req.SetBasicAuth(u.User.Username(), p)
	}
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var mu sync.Mutex
	seen := map[string]time.Time{}
	arrived := make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var row struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(sc.Bytes(), &row) != nil || row.ID == "" {
				continue
			}
			now := time.Now()
			mu.Lock()
			if _, ok := seen[row.ID]; !ok {
				seen[row.ID] = now
			}
			mu.Unlock()
			select {
			case arrived <- struct{}{}:
			default:
			}
		}
	}()
	auth := func(r *http.Request) {
		if u, _ := url.Parse(srv.AdminURL()); u.User != nil {
			p, _ := u.User.Password()
			r.SetBasicAuth(u.User.Username(), p)
		}
	}
	// Warm-up: the replicator is running once a first document arrives
	// (CouchDB's scheduler takes a few seconds to start a job).
	wr, _ := http.NewRequestWithContext(ctx, "PUT", srv.DBURL(src)+"/warmup", bytes.NewReader([]byte(`{}`)))
	auth(wr)
	if wresp, err := hc.Do(wr); err != nil {
		b.Fatal(err)
	} else {
		wresp.Body.Close()
	}
	for {
		mu.Lock()
		_, ok := seen["warmup"]
		mu.Unlock()
		if ok {
			break
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			b.Fatal("the warm-up document never reached the target")
		}
	}
	// The writer: one PUT every 1/rate s, acknowledgement times recorded.
	n := rate * secs
	acked := make(map[string]time.Time, n)
	var wlat []time.Duration
	before := srcRequests()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for i := range n {
		<-tick.C
		id := fmt.Sprintf("w%06d", i)
		r, _ := http.NewRequestWithContext(ctx, "PUT", srv.DBURL(src)+"/"+id, bytes.NewReader([]byte(`{"v":1}`)))
		auth(r)
		t0 := time.Now()
		resp, err := hc.Do(r)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		now := time.Now()
		if resp.StatusCode != 201 {
			b.Fatalf("PUT %s: %d", id, resp.StatusCode)
		}
		acked[id] = now
		wlat = append(wlat, now.Sub(t0))
	}
	tick.Stop()
	for {
		mu.Lock()
		got := 0
		for id := range acked {
			if _, ok := seen[id]; ok {
				got++
			}
		}
		mu.Unlock()
		if got == n {
			break
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			b.Fatalf("%d of %d documents reached the target", got, n)
		}
	}
	reqs := srcRequests() - before
	var lags []time.Duration
	mu.Lock()
	for id, a := range acked {
		lags = append(lags, seen[id].Sub(a))
	}
	mu.Unlock()
	slices.Sort(lags)
	slices.Sort(wlat)
	pct := func(d []time.Duration, p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return lagFigures{n: n, p50: pct(lags, 0.5), p99: pct(lags, 0.99), max: lags[len(lags)-1],
		wp50: pct(wlat, 0.5), wp99: pct(wlat, 0.99), srcReqs: float64(reqs)}
}
