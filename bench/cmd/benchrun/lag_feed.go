package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// lagFeed reads a target database's continuous _changes feed and notes
// when each id first appears.
type lagFeed struct {
	cancel  context.CancelFunc
	mu      sync.Mutex
	seen    map[string]time.Time
	arrived chan struct{}
	done    chan struct{}
	err     error
}

var feedClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

func openLagFeed(ctx context.Context, dbURL string) (*lagFeed, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, dbURL+"/_changes?feed=continuous&since=now&heartbeat=1000", nil)
	if err != nil {
		cancel()
		return nil, err
	}
	// Not gzip: PouchDB Server's compression would hold the rows back.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := feedClient.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("target _changes: HTTP %d", resp.StatusCode)
	}
	f := &lagFeed{cancel: cancel, seen: map[string]time.Time{}, arrived: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var row struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(sc.Bytes(), &row) != nil || row.ID == "" {
				continue
			}
			now := time.Now()
			f.mu.Lock()
			if _, ok := f.seen[row.ID]; !ok {
				f.seen[row.ID] = now
			}
			f.mu.Unlock()
			select {
			case f.arrived <- struct{}{}:
			default:
			}
		}
		f.mu.Lock()
		f.err = sc.Err()
		f.mu.Unlock()
	}()
	return f, nil
}

// wait returns once every id has appeared on the feed.
func (f *lagFeed) wait(ctx context.Context, ids []string, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		got := 0
		for _, id := range ids {
			if _, ok := f.seen[id]; ok {
				got++
			}
		}
		f.mu.Unlock()
		if got == len(ids) {
			return nil
		}
		select {
		case <-f.arrived:
		case <-f.done:
			return fmt.Errorf("target feed ended (%v) with %d of %d documents", f.err, got, len(ids))
		case <-deadline.C:
			return fmt.Errorf("%d of %d documents reached the target within %s", got, len(ids), timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// lags returns the sorted lags of w's documents.
func (f *lagFeed) lags(w writeRun) []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]time.Duration, 0, len(w.ids))
	for _, id := range w.ids {
		out = append(out, f.seen[id].Sub(w.acked[id]))
	}
	slices.Sort(out)
	return out
}

func (f *lagFeed) close() {
	if f == nil {
		return
	}
	f.cancel()
	<-f.done
}
