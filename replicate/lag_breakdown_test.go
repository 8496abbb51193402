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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/replicate"
)

// TestContinuousLagBreakdown (SOFA_LAG_BREAKDOWN=1 only: a measurement)
// splits the lag of a continuous replication into its parts, per
// document, at SOFA_LAG_RATE writes/s (default 1,000; 32 writers paced
// as in bench/cmd/benchrun's lag benchmark) for SOFA_LAG_SECONDS
// (default 10) with SOFA_LAG_FLUSH (default 50 ms) and SOFA_LAG_WORKERS
// (default: the engine's): the source's feed
// (the writer's acknowledgement to the row reaching the engine, read by a
// wrapper around the source's Follow), batching (the row's arrival to its
// _bulk_docs being sent, wrapped around the target's WriteDocs), the
// write (sent to acknowledged) and the target's feed (acknowledged to the
// row in the target's continuous _changes, read by the test). Each part's
// p50/p99 and the p99 of the whole are logged.
//
//	SOFA_LAG_BREAKDOWN=1 SOFA_TEST_SERVER=couchdb go test ./replicate -run LagBreakdown -v
func TestContinuousLagBreakdown(t *testing.T) {
	if os.Getenv("SOFA_LAG_BREAKDOWN") == "" {
		t.Skip("a measurement: set SOFA_LAG_BREAKDOWN=1")
	}
	rate := envInt("SOFA_LAG_RATE", 1000)
	secs := envInt("SOFA_LAG_SECONDS", 10)
	flush := 50 * time.Millisecond
	if d, err := time.ParseDuration(os.Getenv("SOFA_LAG_FLUSH")); err == nil {
		flush = d
	}
	a, b := couchtest.Start(t), couchtest.Start(t)
	src, tgt := a.NewDB(t), b.NewDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sep, err := couch.Probe(ctx, a.AdminURL(), couch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tep, err := couch.Probe(ctx, b.AdminURL(), couch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tl := &timeline{feed: map[string]time.Time{}, sent: map[string]time.Time{}, acked: map[string]time.Time{}, seen: map[string]time.Time{}}
	ws := &timedSource{DB: sep.Server.DB(src), tl: tl}
	wt := &timedTarget{DB: tep.Server.DB(tgt), tl: tl}
	go tl.follow(ctx, t, b, tgt)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = replicate.Run(ctx, ws, wt, replicate.Options{Continuous: true, FlushInterval: flush, Workers: envInt("SOFA_LAG_WORKERS", 0)})
	}()
	defer func() { cancel(); <-done }()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	put := func(id string) (time.Time, error) {
		r, _ := http.NewRequestWithContext(ctx, "PUT", a.DBURL(src)+"/"+id, bytes.NewReader([]byte(`{"v":1,"pad":"0123456789012345678901234567890123456789012345678901234567890123456789"}`)))
		if u, _ := url.Parse(a.AdminURL()); u.User != nil {
			p, _ := u.User.Password()
			r.SetBasicAuth(u.User.Username(), p)
		}
		resp, err := hc.Do(r)
		if err != nil {
			return time.Time{}, err
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			return time.Time{}, fmt.Errorf("PUT %s: %d", id, resp.StatusCode)
		}
		return time.Now(), nil
	}
	if _, err := put("warmup"); err != nil {
		t.Fatal(err)
	}
	tl.waitSeen(t, []string{"warmup"})

	n := rate * secs
	ids := make([]string, n)
	ack := make([]time.Time, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range next {
				at, err := put(ids[i])
				if err != nil {
					t.Error(err)
				}
				ack[i] = at
			}
		})
	}
	t0 := time.Now()
	for i := range n {
		ids[i] = fmt.Sprintf("w%06d", i)
		time.Sleep(time.Until(t0.Add(time.Duration(i) * time.Second / time.Duration(rate))))
		next <- i
	}
	close(next)
	wg.Wait()
	span := time.Since(t0)
	tl.waitSeen(t, ids)

	var feed, batch, write, visible, total []time.Duration
	tl.mu.Lock()
	for i, id := range ids {
		feed = append(feed, tl.feed[id].Sub(ack[i]))
		batch = append(batch, tl.sent[id].Sub(tl.feed[id]))
		write = append(write, tl.acked[id].Sub(tl.sent[id]))
		visible = append(visible, tl.seen[id].Sub(tl.acked[id]))
		total = append(total, tl.seen[id].Sub(ack[i]))
	}
	writes, sizes := tl.writes, append([]int(nil), tl.sizes...)
	tl.mu.Unlock()
	q := func(d []time.Duration) string {
		d = slices.Clone(d)
		slices.Sort(d)
		at := func(p float64) time.Duration {
			return d[min(len(d)-1, int(p*float64(len(d))))].Round(100 * time.Microsecond)
		}
		return fmt.Sprintf("p50 %v p99 %v max %v", at(0.5), at(0.99), d[len(d)-1].Round(100*time.Microsecond))
	}
	slices.Sort(sizes)
	t.Logf("%d writes in %s (%.0f/s), flush %s, %d _bulk_docs (median %d docs)", n, span.Round(time.Millisecond), float64(n)/span.Seconds(), flush, writes, sizes[len(sizes)/2])
	t.Logf("source feed    (ack -> row at the engine): %s", q(feed))
	t.Logf("batching       (row -> _bulk_docs sent):   %s", q(batch))
	t.Logf("write          (sent -> acknowledged):     %s", q(write))
	t.Logf("target feed    (acknowledged -> row seen): %s", q(visible))
	t.Logf("total          (ack -> row seen):          %s (target p99 <= flush + 50 ms = %s)", q(total), flush+50*time.Millisecond)
	// How the source's feed delivers: rows less than 1 ms apart are one
	// burst (one read of the connection).
	var at []time.Time
	tl.mu.Lock()
	for _, id := range ids {
		at = append(at, tl.feed[id])
	}
	tl.mu.Unlock()
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	var gaps []time.Duration
	bursts := 1
	for i := 1; i < len(at); i++ {
		if g := at[i].Sub(at[i-1]); g >= time.Millisecond {
			bursts++
			gaps = append(gaps, g)
		}
	}
	tl.mu.Lock()
	spans, waits := tl.spans, tl.waits
	tl.mu.Unlock()
	t.Logf("per _bulk_docs: its rows arrived over %s; its first row waited %s", q(spans), q(waits))
	t.Logf("source feed delivery: %d bursts for %d rows (%.1f rows each); gaps between bursts: %s", bursts, len(at), float64(len(at))/float64(bursts), q(gaps))
}

// timeline records when each document passed each point.
type timeline struct {
	mu                      sync.Mutex
	feed, sent, acked, seen map[string]time.Time
	writes                  int
	sizes                   []int
	spans, waits            []time.Duration // per _bulk_docs: its rows' arrivals, first to last; first arrival to sending
	arrived                 chan struct{}
}

func first(m map[string]time.Time, id string, at time.Time) {
	if _, ok := m[id]; !ok {
		m[id] = at
	}
}

// timedSource stamps each row of the continuous feed as it arrives.
type timedSource struct {
	*couch.DB
	tl *timeline
}

func (s *timedSource) Follow(ctx context.Context, since replicate.Seq, o replicate.FollowOptions, fn func(replicate.Change) error) error {
	return s.DB.Follow(ctx, since, o, func(c replicate.Change) error {
		now := time.Now()
		s.tl.mu.Lock()
		first(s.tl.feed, c.ID, now)
		s.tl.mu.Unlock()
		return fn(c)
	})
}

// timedTarget stamps each document's _bulk_docs sending and answer.
type timedTarget struct {
	*couch.DB
	tl *timeline
}

func (d *timedTarget) WriteDocs(ctx context.Context, docs []*replicate.Doc) ([]replicate.DocError, error) {
	t0 := time.Now()
	fails, err := d.DB.WriteDocs(ctx, docs)
	t1 := time.Now()
	d.tl.mu.Lock()
	d.tl.writes++
	d.tl.sizes = append(d.tl.sizes, len(docs))
	var lo, hi time.Time
	for _, doc := range docs {
		if at, ok := d.tl.feed[doc.ID]; ok {
			if lo.IsZero() || at.Before(lo) {
				lo = at
			}
			if at.After(hi) {
				hi = at
			}
		}
	}
	if !lo.IsZero() {
		d.tl.spans = append(d.tl.spans, hi.Sub(lo))
		d.tl.waits = append(d.tl.waits, t0.Sub(lo))
	}
	for _, doc := range docs {
		first(d.tl.sent, doc.ID, t0)
		first(d.tl.acked, doc.ID, t1)
	}
	d.tl.mu.Unlock()
	return fails, err
}

// follow reads the target's continuous feed from now, stamping rows.
func (tl *timeline) follow(ctx context.Context, t *testing.T, srv *couchtest.Server, db string) {
	tl.mu.Lock()
	tl.arrived = make(chan struct{}, 1)
	tl.mu.Unlock()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.DBURL(db)+"/_changes?feed=continuous&since=now&heartbeat=1000", nil)
	if u, _ := url.Parse(srv.AdminURL()); u.User != nil {
		p, _ := u.User.Password()
		req.SetBasicAuth(u.User.Username(), p)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			t.Error(err)
		}
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var row struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(sc.Bytes(), &row) != nil || row.ID == "" || strings.HasPrefix(row.ID, "_") {
			continue
		}
		now := time.Now()
		tl.mu.Lock()
		first(tl.seen, row.ID, now)
		tl.mu.Unlock()
		select {
		case tl.arrived <- struct{}{}:
		default:
		}
	}
}

func (tl *timeline) waitSeen(t *testing.T, ids []string) {
	t.Helper()
	deadline := time.After(3 * time.Minute)
	for {
		tl.mu.Lock()
		got := 0
		for _, id := range ids {
			if _, ok := tl.seen[id]; ok {
				got++
			}
		}
		ch := tl.arrived
		tl.mu.Unlock()
		if got == len(ids) {
			return
		}
		if ch == nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%d of %d documents on the target's feed after 3 minutes", got, len(ids))
		}
	}
}
