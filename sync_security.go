package sofa

import (
	"context"
	"errors"
	"slices"
	"strconv"

	"github.com/sofadb/sofa/internal/jsonx"
	"github.com/sofadb/sofa/replicate"
)

// securityLoop runs securitySweep every SecurityInterval until ctx ends.
func (s *syncer) securityLoop(ctx context.Context) {
	if s.o.SecurityInterval < 0 {
		return
	}
	everyTick(ctx, s.o.SecurityInterval, func() { s.securitySweep(ctx) })
}

// securitySweep reads, one database at a time, the source's `_security`
// and `_revs_limit` of every database this run has copied (CouchDB
// announces neither in a feed) and writes each to the target where it
// differs from what the target was last seen or made to hold (the first
// time: from the target's own). A failed read or write is logged and
// tried again at the next sweep; one refused for lack of rights
// (replicate.ErrDenied, but for a write refused to an account that is
// not the database's admin) stops the run (refused).
func (s *syncer) securitySweep(ctx context.Context) {
	s.mu.Lock()
	var names []string
	for n, d := range s.dbs {
		if d.synced && !d.deleted {
			names = append(names, n)
		}
	}
	s.mu.Unlock()
	slices.Sort(names)
	for _, name := range names {
		if ctx.Err() != nil || s.sweepSecurity(ctx, name) || s.sweepRevsLimit(ctx, name) {
			return
		}
	}
}

// sweepSecurity is securitySweep's `_security` of one database; it
// reports whether the run stops (refused).
func (s *syncer) sweepSecurity(ctx context.Context, name string) (stop bool) {
	sec, err := s.ssrv.DB(name).Security(ctx)
	if errors.Is(err, replicate.ErrNotFound) {
		return false // deleted at the source: the watch handles it, the copy keeps its _security
	}
	if s.refused(name, err) {
		return true
	}
	if err != nil {
		s.o.Copy.logf("%s: source: %v; trying again in %s", name, err, s.o.SecurityInterval)
		return false
	}
	var last []byte
	s.mu.Lock()
	if d := s.dbs[name]; d != nil {
		last = d.security
	}
	s.mu.Unlock()
	tdb := s.tsrv.DB(name)
	if last == nil {
		if last, err = tdb.Security(ctx); s.refused(name, err) {
			return true
		} else if err != nil {
			s.o.Copy.logf("%s: target: %v; trying again in %s", name, err, s.o.SecurityInterval)
			return false
		}
	}
	if !jsonx.Same(sec, last) {
		if err := tdb.SetMetadata(ctx, replicate.Metadata{Security: sec}, replicate.AfterDocs); s.refused(name, err) {
			return true // not one refused as the account is not the database's admin (a warning)
		} else if err != nil {
			s.o.Copy.logf("%s: target: %v; trying again in %s", name, err, s.o.SecurityInterval)
			s.event(SyncEvent{Kind: EventSecurity, DB: name, Err: err})
			return false
		}
		s.o.Copy.logf("%s: _security changed at the source: written to the target", name)
		s.event(SyncEvent{Kind: EventSecurity, DB: name, Detail: string(sec)})
		s.mu.Lock()
		s.sum.SecurityUpdates++
		s.mu.Unlock()
	}
	s.mu.Lock()
	if d := s.dbs[name]; d != nil {
		d.security = sec
	}
	s.mu.Unlock()
	return false
}

// sweepRevsLimit is securitySweep's `_revs_limit` of one database (a
// server without one, PouchDB Server, is passed over); it reports
// whether the run stops (refused).
func (s *syncer) sweepRevsLimit(ctx context.Context, name string) (stop bool) {
	n, err := s.ssrv.DB(name).RevsLimit(ctx)
	if errors.Is(err, replicate.ErrNotFound) || err == nil && n <= 0 {
		return false // deleted at the source (the watch handles it), or no such setting
	}
	if s.refused(name, err) {
		return true
	}
	if err != nil {
		s.o.Copy.logf("%s: source: %v; trying again in %s", name, err, s.o.SecurityInterval)
		return false
	}
	s.mu.Lock()
	last := 0
	if d := s.dbs[name]; d != nil {
		last = d.revsLimit
	}
	s.mu.Unlock()
	tdb := s.tsrv.DB(name)
	if last == 0 {
		if last, err = tdb.RevsLimit(ctx); s.refused(name, err) {
			return true
		} else if err != nil {
			s.o.Copy.logf("%s: target: %v; trying again in %s", name, err, s.o.SecurityInterval)
			return false
		}
	}
	if last > 0 && n != last {
		if err := tdb.SetMetadata(ctx, replicate.Metadata{RevsLimit: n}, replicate.BeforeDocs); s.refused(name, err) {
			return true
		} else if err != nil {
			s.o.Copy.logf("%s: target: %v; trying again in %s", name, err, s.o.SecurityInterval)
			s.event(SyncEvent{Kind: EventRevsLimit, DB: name, Err: err})
			return false
		}
		s.o.Copy.logf("%s: _revs_limit changed at the source: written to the target (%d)", name, n)
		s.event(SyncEvent{Kind: EventRevsLimit, DB: name, Detail: strconv.Itoa(n)})
		s.mu.Lock()
		s.sum.RevsLimitUpdates++
		s.mu.Unlock()
	}
	s.mu.Lock()
	if d := s.dbs[name]; d != nil {
		d.revsLimit = n
	}
	s.mu.Unlock()
	return false
}
