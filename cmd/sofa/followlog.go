package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sofadb/sofa"
)

// defaultFollowEvery is the time between a following run's progress
// lines without --progress-interval (the progress display's default).
const defaultFollowEvery = 10 * time.Second

// followLog prints what a continuous whole-server run does once it
// follows the source (the progress display ends with the initial copy):
// every interval, the catch-up copies that ended since the line before;
// after six intervals without one, a line saying so.
type followLog struct {
	every time.Duration
	logf  func(format string, args ...any)

	mu        sync.Mutex
	following bool
	copies    int
	failed    int
	dbs       map[string]bool
	written   int64
	total     int64
}

func newFollowLog(every time.Duration, logf func(string, ...any)) *followLog {
	if every <= 0 {
		every = defaultFollowEvery
	}
	return &followLog{every: every, logf: logf, dbs: map[string]bool{}}
}

// event counts a Sync event (SyncOptions.Event).
func (f *followLog) event(e sofa.SyncEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch e.Kind {
	case sofa.EventCaughtUp:
		f.following = true
	case sofa.EventSynced:
		if !f.following {
			return
		}
		f.copies++
		if e.Err != nil {
			f.failed++
		}
		f.dbs[e.DB] = true
		f.written += e.DocsWritten
		f.total += e.DocsWritten
	}
}

// run prints the lines until ctx ends.
func (f *followLog) run(ctx context.Context) {
	t := time.NewTicker(f.every)
	defer t.Stop()
	idle := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.mu.Lock()
		if !f.following {
			f.mu.Unlock()
			continue
		}
		copies, failed, dbs, written, total := f.copies, f.failed, len(f.dbs), f.written, f.total
		f.copies, f.failed, f.written = 0, 0, 0
		clear(f.dbs)
		f.mu.Unlock()
		if copies == 0 {
			if idle++; idle == 6 {
				f.logf("following: no change copied in the last %s; docs_written=%d since the initial copy", 6*f.every, total)
				idle = 0
			}
			continue
		}
		idle = 0
		f.logf("following: %s of %s ended (%d failed): docs_written=+%d; docs_written=%d since the initial copy",
			catchUpCopies(int64(copies)), countDBs(dbs), failed, written, total)
	}
}

// catchUpCopies is "1 catch-up copy" or "N catch-up copies".
func catchUpCopies(n int64) string {
	if n == 1 {
		return "1 catch-up copy"
	}
	return fmt.Sprintf("%d catch-up copies", n)
}
