package sofa_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/recproxy"
)

// TestSync_Measure (SOFA_MEASURE=1 only: it takes minutes) measures a
// continuous whole-server run over 500 databases: the request rate on the
// source while they sit idle for 10 s, and the time from a write in a
// random database to its arrival on the target (read with a longpoll on
// the target's changes feed), over 100 writes made 100 ms apart. CouchDB
// is measured with its _db_updates feed and polling; PouchDB Server polls.
// SOFA_MEASURE_WRITE_DELAY sets CouchDB's [global_changes]
// max_write_delay (ms) on the source.
func TestSync_Measure(t *testing.T) {
	if os.Getenv("SOFA_MEASURE") == "" {
		t.Skip("set SOFA_MEASURE=1 to measure")
	}
	var so couchtest.Options
	if d := os.Getenv("SOFA_MEASURE_WRITE_DELAY"); d != "" && couchtest.IsCouchDB() {
		// CouchDB writes _global_changes (what _db_updates reads) at most
		// every max_write_delay ms (default 500)
		so.Config = map[string]string{"global_changes/max_write_delay": d}
	}
	a := couchtest.StartWith(t, so)
	b := couchtest.Start(t)
	const n = 500
	t0 := time.Now()
	names := seedMany(t, a, "m", n)
	t.Logf("%d databases created in %s", n, time.Since(t0).Round(time.Second))
	enableDBUpdates(t, a)
	rec := recproxy.Start(t, a.URL)
	modes := []sofa.SyncOptions{{Poll: true}}
	if a.Kind == couchtest.CouchDB {
		modes = []sofa.SyncOptions{{}, {Poll: true}}
	}
	for _, o := range modes {
		t0 := time.Now()
		r := startSync(t, rec.URL, b.URL, o)
		r.wait("the initial copy", func() bool { return r.caughtUp })
		t.Logf("[%s %s] initial copy of %d databases: %s", a.Kind, r.mode, n, time.Since(t0).Round(100*time.Millisecond))
		rec.ResetNow()
		time.Sleep(10 * time.Second) // the measurement window
		idle := len(rec.Recorded())
		t.Logf("[%s %s] idle: %d source requests in 10 s = %.2f requests/s for %d databases (one feed per database: %d open connections)",
			a.Kind, r.mode, idle, float64(idle)/10, n, n)
		lat := measureLag(t, a, b, names, 100)
		t.Logf("[%s %s] write to arrival over %d writes: p50 %s, p99 %s, max %s", a.Kind, r.mode, len(lat),
			pct(lat, 50), pct(lat, 99), lat[len(lat)-1])
		r.stop()
		rec.Reset()
	}
}

// measureLag writes count documents 100 ms apart into random databases
// of names and returns, sorted, the time each took to appear on the
// target's changes feed.
func measureLag(t *testing.T, a, b *couchtest.Server, names []string, count int) []time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ca, cb := couchtest.NewClient(a.URL), couchtest.NewClient(b.URL)
	var mu sync.Mutex
	var out []time.Duration
	var wg sync.WaitGroup
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := range count {
		<-tick.C
		db := names[rand.IntN(len(names))]
		id := fmt.Sprintf("lag-%d-%d", time.Now().UnixNano(), i)
		var info struct {
			UpdateSeq json.RawMessage `json:"update_seq"`
		}
		if err := cb.GetJSON(ctx, "/"+db, &info); err != nil {
			t.Fatal(err)
		}
		since := strings.Trim(string(info.UpdateSeq), `"`)
		w0 := time.Now()
		if _, err := ca.PutDoc(ctx, db, id, map[string]any{"written": w0.UnixNano()}); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				var ch struct {
					Results []struct {
						ID string `json:"id"`
					} `json:"results"`
					LastSeq json.RawMessage `json:"last_seq"`
				}
				if err := cb.GetJSON(ctx, "/"+db+"/_changes?feed=longpoll&timeout=60000&since="+since, &ch); err != nil {
					t.Error(err)
					return
				}
				for _, r := range ch.Results {
					if r.ID == id {
						mu.Lock()
						out = append(out, time.Since(w0))
						mu.Unlock()
						return
					}
				}
				since = strings.Trim(string(ch.LastSeq), `"`)
			}
		})
	}
	wg.Wait()
	slices.Sort(out)
	if len(out) < count {
		t.Fatalf("%d of %d writes arrived", len(out), count)
	}
	return out
}

func pct(d []time.Duration, p int) time.Duration {
	i := (len(d)*p + 99) / 100
	return d[min(max(i-1, 0), len(d)-1)].Round(time.Millisecond)
}
