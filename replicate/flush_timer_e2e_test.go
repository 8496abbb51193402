package replicate_test

import (
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/replicate"
)

// timedObserver signals every batch handed to the workers (ChangesSeen)
// and records when each batch was acknowledged.
type timedObserver struct {
	replicate.NopObserver
	sent    chan int
	mu      sync.Mutex
	written []time.Time
	wrote   chan struct{}
}

func (o *timedObserver) ChangesSeen(n int, _ int64) { o.sent <- n }
func (o *timedObserver) BatchWritten(int, int, time.Duration) {
	o.mu.Lock()
	o.written = append(o.written, time.Now())
	o.mu.Unlock()
	select {
	case o.wrote <- struct{}{}:
	default:
	}
}

func (o *timedObserver) waitSent(t *testing.T, what string) {
	t.Helper()
	select {
	case <-o.sent:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: no batch handed to the workers within 2 minutes", what)
	}
}

// A change that waited on the feed while the workers were busy (the
// target slow) is flushed FlushInterval after it arrived, not a whole
// FlushInterval after the workers freed up: with one worker, the first
// _bulk_docs held by the proxy, a batch queued and the next batch's send
// blocked, a document written meanwhile is written right after the
// blocked batch once the target answers.
func TestContinuous_FlushIntervalCountsFromArrival(t *testing.T) {
	srv, src, tgt, sdb, _ := pair(t)
	const flush = 5 * time.Second
	px := faultproxy.StartT(t, srv.URL)
	if err := px.SetRules(faultproxy.Rule{Name: "hold", Method: "POST", Path: `/_bulk_docs$`, Times: 1, Delay: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	obs := &timedObserver{sent: make(chan int, 100), wrote: make(chan struct{}, 1)}
	f := follow(t, sdb, openAt(t, withAdmin(srv, px.URL), tgt), replicate.Options{Workers: 1, FlushInterval: flush, Observer: obs})
	// Batch 1: held at the target by the proxy.
	mustBulk(t, srv, src, true, raw(`{"_id":"a"}`))
	obs.waitSent(t, "batch 1")
	// Batch 2: queued for the busy worker.
	mustBulk(t, srv, src, true, raw(`{"_id":"b"}`))
	obs.waitSent(t, "batch 2")
	// Batch 3: its hand-over blocks until the worker is free.
	mustBulk(t, srv, src, true, raw(`{"_id":"c"}`))
	obs.waitSent(t, "batch 3")
	if px.Rule("hold").Fired != 1 {
		t.Fatalf("the first _bulk_docs is not held (rule fired %d times)", px.Rule("hold").Fired)
	}
	// Batch 4's only change waits on the feed meanwhile.
	mustBulk(t, srv, src, true, raw(`{"_id":"d"}`))
	for {
		obs.mu.Lock()
		n := len(obs.written)
		obs.mu.Unlock()
		if n >= 4 {
			break
		}
		select {
		case <-obs.wrote:
		case <-time.After(2 * time.Minute):
			t.Fatalf("%d of 4 batches written within 2 minutes", n)
		}
	}
	f.alive(t)
	obs.mu.Lock()
	gap := obs.written[3].Sub(obs.written[2])
	obs.mu.Unlock()
	t.Logf("batch 4 written %s after batch 3 (flush interval %s)", gap.Round(time.Millisecond), flush)
	if gap >= flush/2 {
		t.Errorf("batch 4 was written %s after batch 3: its change waited a whole flush interval (%s) after the worker freed up", gap.Round(time.Millisecond), flush)
	}
}
