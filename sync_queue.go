package sofa

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/metrics"
	"github.com/sofadb/sofa/replicate"
)

// syncDB is one database's scheduling state (under syncer.mu).
type syncDB struct {
	pending bool      // queued, not started
	running bool      // a copy runs
	again   bool      // changed while running: one more run after it
	noticed time.Time // first change not yet written (zero: none)
	againAt time.Time // first change noticed while running
	synced  bool      // copied once by this run: the target exists
	deleted bool      // gone from the source
	retry   time.Duration
	behind  bool
	// sess is the database's replication kept from its last copy: a
	// wake is one pass of it. stale: drop it at the next wake (the
	// source database was deleted or created, or the watch had a gap).
	sess  *replicate.Session
	stale bool
	// gone: the watch saw the database deleted since its last copy (a
	// _db_updates "deleted" row, a poll that did not list it), whether or
	// not it exists again now.
	gone bool
	// polled is the source's info from the last poll that saw it
	// change (poll mode), checked against sess before a pass.
	polled *replicate.DBInfo
	// security is the `_security` the target was last seen or made to
	// hold (securitySweep); nil: not read yet.
	security []byte
	// revsLimit is the `_revs_limit` the target was last seen or made
	// to hold (securitySweep); 0: not read yet, or a server without it.
	revsLimit int
	// refusal is the refusal of its target database (not empty, not a
	// copy) last logged: the same one again at the next change says
	// nothing new, and is not logged.
	refusal string
}

// change is what the watch says about a database: when it noticed, and
// whether the database may have been deleted or created since (its
// Session is then not trusted), and, when polled, its info.
type change struct {
	at     time.Time
	stale  bool
	gone   bool // seen deleted
	polled *replicate.DBInfo
}

func (s *syncer) dbLocked(name string) *syncDB {
	d := s.dbs[name]
	if d == nil {
		d = &syncDB{}
		s.dbs[name] = d
		s.o.Metrics.DB(name)
	}
	return d
}

// mark says name changed at time at: it is queued unless it already is;
// a running one gets one more run.
func (s *syncer) mark(name string, at time.Time) { s.note(name, change{at: at}) }

// note is mark with what the watch knows of the change. No change is
// lost: a database changed while its copy runs gets one more run after
// it, and one already queued stays queued once.
func (s *syncer) note(name string, c change) {
	at := c.at
	if !s.owns(name) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.HasPrefix(name, "_") && s.dbs[name] == nil && !s.includesSystem(name) {
		// _dbs, _nodes and the like (_db_updates names them) and system
		// databases not selected at the start
		return
	}
	d := s.dbLocked(name)
	if c.stale {
		d.stale = true
	}
	if c.gone {
		d.gone = true
		if d.running && s.o.Copy.DebugLogf != nil {
			s.o.Copy.DebugLogf("%s: deleted on the source while it is copied: judged when the copy ends", name)
		}
	}
	if c.polled != nil {
		d.polled = c.polled
	}
	if d.running {
		d.again = true
		if d.againAt.IsZero() || at.Before(d.againAt) {
			d.againAt = at
		}
		return
	}
	if d.noticed.IsZero() || at.Before(d.noticed) {
		d.noticed = at
	}
	if !d.pending {
		d.pending = true
		s.queue = append(s.queue, name)
		s.o.Metrics.DB(name).SetState(metrics.StateQueued)
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// owns reports whether the database name is this run's: kept by the
// selection, shard included. The catch-up's listing (SelectDBs), the
// watch's rows, the polls and a database new on the source are all
// judged by it (Selection.holds).
func (s *syncer) owns(name string) bool { return s.sel.holds(name) }

// includesSystem reports whether an Include pattern that begins with "_"
// names the system database name.
func (s *syncer) includesSystem(name string) bool {
	for _, p := range s.sel.Include {
		if fleet.MatchPattern(p, name) && strings.HasPrefix(p, "_") {
			return true
		}
	}
	return false
}

// markAll marks every database of the source (and every one known)
// changed: after a gap in the watch.
func (s *syncer) markAll(ctx context.Context) {
	now := time.Now()
	names, err := fleet.ListDBs(ctx, s.ssrv, 1000)
	if err != nil {
		s.o.Copy.logf("source: list databases: %v", err)
	}
	s.mu.Lock()
	for n := range s.dbs {
		names = append(names, n)
	}
	s.mu.Unlock()
	for _, n := range names {
		s.note(n, change{at: now, stale: true})
	}
}

// dispatch starts the queued databases, one fleet.Run per wave, until ctx
// ends; then it waits for the running ones (final checkpoints).
func (s *syncer) dispatch(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	fo := fleet.Options{Limiters: limiters(s.src, s.dst), MaxDBs: s.o.Copy.MaxDBs, Fixed: s.o.Copy.Fixed, Logger: s.o.Copy.Logger}
	select {
	case s.wake <- struct{}{}: // what was marked during the catch-up
	default:
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		s.mu.Lock()
		names := s.queue
		s.queue = nil
		for _, n := range names {
			d := s.dbs[n]
			d.pending, d.running = false, true
		}
		s.mu.Unlock()
		if len(names) == 0 {
			continue
		}
		wg.Go(func() {
			sum, _ := fleet.Run(ctx, names, s.wakeJob, fo)
			for _, r := range sum.DBs {
				if r.Status == fleet.StatusNotStarted {
					s.mu.Lock()
					s.dbs[r.Name].running = false
					s.mu.Unlock()
				}
			}
		})
	}
}
