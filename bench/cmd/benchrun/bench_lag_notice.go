package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// noticeFeed reads the source's `_db_updates?feed=continuous` from now
// on, as a replicator driven by it would, and keeps each database's row
// arrival times: the notice of a write is the first row of its database
// that arrived after the write was sent. CouchDB buffers the feed for up
// to [global_changes] max_write_delay (500 ms by default): no replicator
// woken by it can do better.
type noticeFeed struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	rows   map[string][]time.Time
	done   chan struct{}
}

// openNoticeFeed opens the feed of the server at serverURL; it fails on a
// server without one.
func openNoticeFeed(ctx context.Context, serverURL string) (*noticeFeed, error) {
	fctx, cancel := context.WithCancel(ctx)
	req, err := newRequest(fctx, http.MethodGet, serverURL+"/_db_updates?feed=continuous&since=now&heartbeat=1000", nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := feedClient.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET /_db_updates: HTTP %d %s", resp.StatusCode, b)
	}
	f := &noticeFeed{cancel: cancel, rows: map[string][]time.Time{}, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var row struct {
				DBName string `json:"db_name"`
			}
			if json.Unmarshal(sc.Bytes(), &row) != nil || row.DBName == "" {
				continue
			}
			now := time.Now()
			f.mu.Lock()
			f.rows[row.DBName] = append(f.rows[row.DBName], now)
			f.mu.Unlock()
		}
	}()
	return f, nil
}

// notices returns, sorted, for each write i (database dbs[i], sent at
// sent[i], acknowledged at ack[i]) the time from its acknowledgement to
// its database's first row after sent[i]; missing counts writes with no
// such row.
func (f *noticeFeed) notices(dbs []string, sent, ack []time.Time) (d []time.Duration, missing int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, db := range dbs {
		j, _ := slices.BinarySearchFunc(f.rows[db], sent[i], func(a, b time.Time) int { return a.Compare(b) })
		if j == len(f.rows[db]) {
			missing++
			continue
		}
		d = append(d, f.rows[db][j].Sub(ack[i]))
	}
	slices.Sort(d)
	return d, missing
}

func (f *noticeFeed) close() {
	f.cancel()
	<-f.done
}
