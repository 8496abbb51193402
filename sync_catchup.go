package sofa

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/dbcopy"
	"github.com/sofadb/sofa/metrics"
	"github.com/sofadb/sofa/replicate"
)

// wakeJob catches one changed database up: the whole copy (create,
// properties) the first time; after that one pass of the database's
// replicate.Session, kept from its last copy (so a wake costs the
// changes' requests only: `_changes`, `_revs_diff`, `_bulk_get`,
// `_bulk_docs`), or, when there is none (dropped: the database was
// recreated, the watch had a gap), an incremental replication that opens
// a new one.
func (s *syncer) wakeJob(ctx context.Context, name string, p DBProgress) (fleet.DBResult, error) {
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		return fleet.DBResult{Name: name}, ctx.Err()
	}
	s.mu.Lock()
	d := s.dbs[name]
	if d.stale {
		d.sess, d.stale = nil, false
	}
	noticed, synced, sess, polled, gone := d.noticed, d.synced, d.sess, d.polled, d.gone
	d.gone = false
	s.mu.Unlock()
	m := s.o.Metrics.DB(name)
	m.BeginRun(true)
	var (
		r   fleet.DBResult
		res *replicate.Result
		err error
	)
	if sess != nil && polled != nil {
		var recreated bool
		sess, recreated = s.checkRecreated(ctx, name, sess, polled)
		gone = gone || recreated
	}
	if gone && s.o.DeleteMissing {
		// Seen deleted since its last copy, or during its first one
		// (which may have written part of the old database): if it
		// exists again, it is another database, and the target's copy
		// of the old one goes.
		if err = s.mirrorRecreated(ctx, name, "deleted and created again on the source"); err == nil {
			synced, sess = false, nil
		}
	}
	// firstCopy is the whole copy of a database the target holds no
	// copy of from this run (create, properties, documents).
	firstCopy := func() (fleet.DBResult, error) {
		o := s.o.Copy
		o.Verify = VerifyNone
		j := o.job(s.ssrv, s.tsrv, s.budget, nil)
		j.observer, j.keep = s.observer, s.keep
		return j.fleetJob()(ctx, name, p)
	}
	switch {
	case err != nil:
		r.Name = name
	case sess != nil:
		res, err = sess.Pass(ctx)
		r.Name = name
		dbcopy.FillResult(&r, res)
		s.logFailures(name, res)
		if err != nil && errors.Is(err, replicate.ErrNotFound) {
			s.dropSession(ctx, name, sess)
		}
		res = nil // not checkpointed: the Session's Observer says when it is
	case synced:
		res, err = s.reopen(ctx, name, m)
		r.Name = name
		dbcopy.FillResult(&r, res)
		s.logFailures(name, res)
	default:
		r, err = firstCopy()
	}
	if errors.Is(err, replicate.ErrSourceRecreated) {
		// Its checkpoint (read again after a gap in the watch, or by a
		// first copy) says what the watch did not see.
		res = nil
		r, err = s.startOver(ctx, name, err, firstCopy)
	}
	s.mu.Lock()
	s.sum.Runs++
	s.sum.DocsWritten += r.DocsWritten
	s.sum.DocWriteFailures += r.DocWriteFailures
	s.mu.Unlock()
	s.ended(ctx, name, r, res, err, noticed, true)
	return r, err
}

// reopen is the incremental catch-up of a database this run has copied
// before but holds no Session for: its target exists and holds the
// checkpoint, which a new Session reads and judges (a recreated source
// database starts over) before its first pass. The Session is kept.
func (s *syncer) reopen(ctx context.Context, name string, m *metrics.DB) (*replicate.Result, error) {
	sdb, tdb := s.ssrv.DB(name), s.tsrv.DB(name)
	sinfo, err := sdb.InfoBatched(ctx)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	opts := s.o.Copy.Engine
	opts.SourceReadOnly = !s.o.Copy.SourceCheckpoints
	opts.SourceInfo = &sinfo
	opts.Budget = s.budget
	opts.Counters = &replicate.Counters{}
	opts.Observer = m
	opts.Warn = func(w string) { s.o.Copy.logf("%s: %s", name, w) }
	if s.o.Copy.DebugLogf != nil {
		opts.Debug = func(format string, args ...any) { s.o.Copy.DebugLogf(name+": "+format, args...) }
	}
	sess, err := replicate.Open(ctx, sdb, tdb, opts)
	var res *replicate.Result
	if err == nil {
		if res, err = sess.Pass(ctx); err == nil {
			s.keep(name, sess)
		}
	}
	if err != nil && errors.Is(err, replicate.ErrNotFound) {
		s.targetGone(ctx, name)
	}
	return res, err
}

// keep records the Session of a database copied with no error.
func (s *syncer) keep(name string, sess *replicate.Session) {
	s.mu.Lock()
	s.dbLocked(name).sess = sess
	s.mu.Unlock()
}

// dropSession forgets the Session of name after a pass found a database
// missing; with the target's gone, the next run creates it.
func (s *syncer) dropSession(ctx context.Context, name string, sess *replicate.Session) {
	s.mu.Lock()
	if d := s.dbs[name]; d.sess == sess {
		d.sess = nil
	}
	s.mu.Unlock()
	s.targetGone(ctx, name)
}

// targetGone marks name to be created again when the target's copy was
// deleted.
func (s *syncer) targetGone(ctx context.Context, name string) {
	if _, terr := s.tsrv.DB(name).Info(ctx); errors.Is(terr, replicate.ErrNotFound) {
		s.mu.Lock()
		s.dbs[name].synced = false
		s.mu.Unlock()
	}
}

// checkRecreated asks, before a pass of a polled source, whether the
// source database was deleted and created again since the Session
// started (its instance, an integer seq gone back, its anchor revision
// gone: see replicate.Session.SourceRecreated); if so, the Session is
// dropped (nil) and the database reopened, which starts over. A source
// with _db_updates says so with its "deleted" and "created" rows instead.
func (s *syncer) checkRecreated(ctx context.Context, name string, sess *replicate.Session, info *replicate.DBInfo) (*replicate.Session, bool) {
	gone, err := sess.SourceRecreated(ctx, info)
	if err != nil {
		s.o.Copy.logf("%s: could not check that the source database is the one followed: %v", name, err)
		return sess, false
	}
	if !gone {
		return sess, false
	}
	s.mu.Lock()
	if d := s.dbs[name]; d.sess == sess {
		d.sess = nil
	}
	s.mu.Unlock()
	return nil, true
}

// logFailures logs the revisions a catch-up could not copy (at most 10
// lines per run; they are counted in doc_write_failures, and the
// checkpoint stays before them, so the next wake tries them again).
func (s *syncer) logFailures(name string, res *replicate.Result) {
	if res == nil {
		return
	}
	for i, f := range res.Failures {
		if i == 10 {
			s.o.Copy.logf("%s: %d more revisions not copied", name, len(res.Failures)-i)
			break
		}
		s.o.Copy.logf("%s: not copied: %s", name, f)
	}
}

// ended records the end of a copy of name (wake: a catch-up, counted in
// Runs; else the initial copy's, counted in its Summary): the source's
// deletion, a failure to retry, or a success; then one more run if it
// changed meanwhile.
func (s *syncer) ended(ctx context.Context, name string, r fleet.DBResult, res *replicate.Result, err error, noticed time.Time, wake bool) {
	m := s.o.Metrics.DB(name)
	var cp string
	if res != nil && err == nil {
		cp = res.EndSeq.String()
	}
	if err != nil && ctx.Err() == nil && errors.Is(err, replicate.ErrNotFound) && s.sourceGone(ctx, name) {
		s.deletedOnSource(ctx, name)
		m.EndRun(0, 0, 0, "", time.Time{}, nil)
		m.SetState(metrics.StateDeleted)
		return
	}
	m.EndRun(r.DocsRead, r.DocsWritten, r.DocWriteFailures, cp, noticed, err)
	interrupted := err != nil && ctx.Err() != nil
	s.mu.Lock()
	d := s.dbLocked(name)
	d.running = false
	again, againAt := d.again, d.againAt
	d.again, d.againAt = false, time.Time{}
	if interrupted {
		if !againAt.IsZero() && (d.noticed.IsZero() || againAt.Before(d.noticed)) {
			d.noticed = againAt
		}
		s.mu.Unlock()
		return
	}
	// the refusal of its target logged before (said), and this one
	refusal := ""
	if errors.Is(err, dbcopy.ErrNotEmpty) {
		refusal = err.Error()
	}
	said := d.refusal
	d.refusal = refusal
	created := false
	if d.deleted {
		d.deleted = false
		s.sum.Created = append(s.sum.Created, name)
		created = true
	}
	var retry time.Duration
	if err != nil {
		if !againAt.IsZero() && (d.noticed.IsZero() || againAt.Before(d.noticed)) {
			d.noticed = againAt // still not written
		}
		noticed = d.noticed
		d.retry = min(max(2*d.retry, s.o.RetryInterval), time.Minute)
		retry = d.retry
		s.sum.Failing[name] = err.Error()
		if wake {
			// not a database deleted on the source (reported as such
			// above); the initial copy's failures are its Summary's
			s.sum.RunsFailed++
		}
	} else {
		if !d.synced && s.sum.CatchUp != nil && !slices.Contains(s.sum.Created, name) && !s.inCatchUp(name) {
			s.sum.Created = append(s.sum.Created, name)
			created = true
		}
		d.synced = true
		d.retry = 0
		d.noticed = againAt // zero, or a change noticed while it ran
		delete(s.sum.Failing, name)
	}
	s.mu.Unlock()
	switch {
	case created && err == nil:
		s.o.Copy.logf("%s: created on the source; copied (docs_written=%d)", name, r.DocsWritten)
	case said != "" && err == nil:
		s.o.Copy.logf("%s: copied after all (docs_written=%d): its target database is no longer refused", name, r.DocsWritten)
	}
	s.event(SyncEvent{Kind: EventSynced, DB: name, Err: err, DocsWritten: r.DocsWritten})
	switch {
	case refusal != "" && refusal == said:
		// Said at the change before: retried at its next change, and
		// logged again only when the outcome is another.
	case refusal != "":
		// Not a passing fault: retried at its next change only.
		s.o.Copy.logf("%s: %v; skipped until it changes again", name, err)
	case s.refused(name, err):
		// A wrong password or a member removed, at either end: the run
		// stops with it rather than retry (each try a failed login).
	case err != nil:
		s.o.Copy.logf("%s: catch-up failed: %v; retrying in %s", name, err, retry)
		time.AfterFunc(retry, func() {
			if ctx.Err() == nil {
				s.mark(name, noticed)
			}
		})
	case again:
		s.mark(name, time.Now())
	}
}

// inCatchUp reports whether name was one of the initial catch-up's
// databases (under s.mu).
func (s *syncer) inCatchUp(name string) bool {
	if s.sum.CatchUp == nil {
		return false // not started yet
	}
	for _, r := range s.sum.CatchUp.DBs {
		if r.Name == name {
			return true
		}
	}
	return false
}
