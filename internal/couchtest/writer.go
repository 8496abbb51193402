package couchtest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Writer puts new documents into databases at a steady pace in the
// background, through whatever happens to the server: a write that fails
// (the server restarting, unreachable) is tried again until it is
// acknowledged, and a retry answered 409 (the first attempt landed, its
// answer was lost) counts as written. Each document is written once.
type Writer struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	ids    map[string][]string // acknowledged, per database
	fails  int                 // failed attempts (retried)
}

// StartWriter writes one document every every into dbs in turn (ids
// PREFIX000000.. with a field "n") with c until Stop.
func StartWriter(c *Client, prefix string, dbs []string, every time.Duration) *Writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{cancel: cancel, done: make(chan struct{}), ids: map[string][]string{}}
	go func() {
		defer close(w.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			db, id := dbs[i%len(dbs)], fmt.Sprintf("%s%06d", prefix, i)
			for {
				_, err := c.PutDoc(ctx, db, id, map[string]any{"n": i})
				if err == nil || StatusOf(err) == http.StatusConflict {
					w.mu.Lock()
					w.ids[db] = append(w.ids[db], id)
					w.mu.Unlock()
					break
				}
				if ctx.Err() != nil {
					return
				}
				w.mu.Lock()
				w.fails++
				w.mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
	}()
	return w
}

// Written is the number of documents acknowledged so far, and of
// attempts that failed and were retried.
func (w *Writer) Written() (n, failed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ids := range w.ids {
		n += len(ids)
	}
	return n, w.fails
}

// WaitWritten waits until n more documents than now are acknowledged
// (ctx bounds it).
func (w *Writer) WaitWritten(ctx context.Context, n int) error {
	start, _ := w.Written()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if got, _ := w.Written(); got >= start+n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.done:
			return fmt.Errorf("couchtest: the writer stopped")
		case <-t.C:
		}
	}
}

// Stop ends the writes (one in progress is abandoned: it may or may not
// have landed, and is not listed) and returns the acknowledged ids per
// database.
func (w *Writer) Stop() map[string][]string {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string][]string, len(w.ids))
	for db, ids := range w.ids {
		out[db] = append([]string(nil), ids...)
	}
	return out
}
