package sofa

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	ctxwait "github.com/sofadb/sofa/internal/wait"
	"github.com/sofadb/sofa/replicate"
)

// watch follows the source's `_db_updates`, or polls it, until ctx ends.
// It sends the mode on ready once changes are caught.
func (s *syncer) watch(ctx context.Context, ready chan<- string) {
	if s.o.Poll {
		s.poll(ctx, ready)
		return
	}
	since := "now"
	first := true
	// The feed is followed from its present position, read first: the
	// initial copy need not wait for the continuous feed's headers,
	// which CouchDB 3 sends only with its first row or heartbeat (up to
	// Heartbeat later). Failing that, from "now", ready once opened.
	if seq, err := s.ssrv.DBUpdatesNow(ctx); err == nil {
		since, first = seq, false
		ready <- "db_updates"
	} else if errors.Is(err, couch.ErrNoDBUpdates) {
		s.pollWhy()
		s.poll(ctx, ready)
		return
	} else if ctx.Err() != nil || s.refused("source", err) {
		return
	}
	wait := 250 * time.Millisecond
	var lostAt time.Time // when the feed failed, until it answers again
	attempts := 0
	for {
		err := s.ssrv.DBUpdates(ctx, since, s.o.Heartbeat, func() {
			if !lostAt.IsZero() {
				s.o.Copy.logf("source: _db_updates feed back after %s (%s)", time.Since(lostAt).Round(100*time.Millisecond), reconnectAttempts(attempts))
				lostAt, attempts = time.Time{}, 0
			}
			if first {
				first = false
				ready <- "db_updates"
			} else if since == "now" {
				// No row seen before the failure: changes may have been
				// missed; every database is looked at.
				go s.markAll(ctx)
			}
			wait = 250 * time.Millisecond
		}, func(u couch.DBUpdate) error {
			if u.Seq != "" {
				since = u.Seq
			}
			// A database deleted or created is not the one its Session
			// follows (a recreation may show as both, or, coalesced, as
			// an update after either).
			s.note(u.DBName, change{at: time.Now(), stale: u.Type == "deleted" || u.Type == "created", gone: u.Type == "deleted"})
			return nil
		})
		if ctx.Err() != nil || s.refused("source", err) {
			return
		}
		if errors.Is(err, couch.ErrNoDBUpdates) {
			if first {
				s.pollWhy()
				s.poll(ctx, ready)
				return
			}
			// A seq the server no longer takes: start from now and
			// look at every database.
			since = "now"
		}
		s.o.Metrics.FeedReconnected(err)
		s.mu.Lock()
		s.sum.Reconnects++
		s.mu.Unlock()
		s.event(SyncEvent{Kind: EventReconnect, Err: err})
		if lostAt.IsZero() {
			lostAt = time.Now()
		}
		attempts++
		s.o.Copy.logf("source: _db_updates feed lost: %v; reconnecting in %s", err, wait)
		if ctxwait.Sleep(ctx, wait) != nil {
			return
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// poll lists the source every PollInterval and marks the databases whose
// update_seq (or instance) changed, appeared or disappeared.
func (s *syncer) poll(ctx context.Context, ready chan<- string) {
	prev, err := s.snapshot(ctx)
	for err != nil {
		if ctx.Err() != nil || s.refused("source", err) {
			return
		}
		s.o.Metrics.FeedReconnected(err)
		s.o.Copy.logf("source: list databases: %v; retrying in %s", err, s.o.PollInterval)
		if ctxwait.Sleep(ctx, s.o.PollInterval) != nil {
			return
		}
		prev, err = s.snapshot(ctx)
	}
	ready <- "poll"
	// the `_db_updates` feed says when it is lost and back; a poll,
	// waiting in its retries, would say nothing until they run out
	defer s.ssrv.WatchReach(s.sourceReach)()
	t := time.NewTicker(s.o.PollInterval)
	defer t.Stop()
	var lostAt time.Time // when a poll failed, until one succeeds
	attempts := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur, err := s.snapshot(ctx)
		if err != nil {
			if ctx.Err() != nil || s.refused("source", err) {
				return
			}
			s.o.Metrics.FeedReconnected(err)
			s.mu.Lock()
			s.sum.Reconnects++
			s.mu.Unlock()
			s.event(SyncEvent{Kind: EventReconnect, Err: err})
			s.o.Copy.logf("source: poll lost: %v; polling again in %s", err, s.o.PollInterval)
			if lostAt.IsZero() {
				lostAt = time.Now()
			}
			attempts++
			continue
		}
		if !lostAt.IsZero() {
			s.o.Copy.logf("source: poll back after %s (%s)", time.Since(lostAt).Round(100*time.Millisecond), reconnectAttempts(attempts))
			lostAt, attempts = time.Time{}, 0
		}
		s.event(SyncEvent{Kind: EventPolled, Detail: fmt.Sprint(len(cur))})
		now := time.Now()
		for n, v := range cur {
			if p, ok := prev[n]; !ok || p.key != v.key {
				// A database that appeared may be one deleted and created
				// again between two polls.
				s.note(n, change{at: now, stale: !ok, polled: v.info})
			}
		}
		for n := range prev {
			if _, ok := cur[n]; !ok {
				s.note(n, change{at: now, stale: true, gone: true})
			}
		}
		prev = cur
	}
}

// polledDB is one database in a poll: its update_seq and instance as a
// key to compare, and its info (nil: it could not be read).
type polledDB struct {
	key  string
	info *replicate.DBInfo
}

// snapshot maps each selected database of the source to its update_seq
// and instance: `_all_dbs`, then `_dbs_info` in batches of 100 where the
// server has it, one `GET /db` per database where not.
func (s *syncer) snapshot(ctx context.Context) (map[string]polledDB, error) {
	names, err := fleet.ListDBs(ctx, s.ssrv, 1000)
	if err != nil {
		return nil, err
	}
	names = s.sel.apply(names) // only this run's (owns)
	out := make(map[string]polledDB, len(names))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2*couch.DBsInfoMax)
	for _, n := range names {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			info, err := s.ssrv.DB(n).InfoBatched(ctx)
			v := polledDB{key: info.UpdateSeq.String() + "|" + info.InstanceStart, info: &info}
			if err != nil {
				if !errors.Is(err, replicate.ErrNotFound) {
					v = polledDB{key: "?"} // unknown: looked at as changed
				} else {
					return
				}
			}
			mu.Lock()
			out[n] = v
			mu.Unlock()
		})
	}
	wg.Wait()
	return out, ctx.Err()
}

// reconnectAttempts is "1 reconnect attempt" or "N reconnect attempts".
func reconnectAttempts(n int) string {
	if n == 1 {
		return "1 reconnect attempt"
	}
	return fmt.Sprintf("%d reconnect attempts", n)
}

// pollWhy says why a run polls the source: it serves no `_db_updates`
// feed, which costs a poll interval of lag.
func (s *syncer) pollWhy() {
	s.o.Copy.logf("source: no _db_updates feed: polling it every %s (changes arrive up to that late; a CouchDB serves _db_updates once its _global_changes database exists)", s.o.PollInterval)
}
