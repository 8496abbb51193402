package sofa

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/metrics"
	"github.com/sofadb/sofa/replicate"
)

// Defaults of SyncOptions.
const (
	// DefaultPollInterval is how often Sync lists a source without
	// `_db_updates` (PouchDB Server) for changed databases.
	DefaultPollInterval = 5 * time.Second
	// DefaultRetryInterval is the first wait before a database whose
	// catch-up failed is tried again (doubling up to a minute).
	DefaultRetryInterval = 2 * time.Second
	// DefaultBehindAfter: a database whose oldest unwritten change is
	// older than this is reported behind.
	DefaultBehindAfter = 10 * time.Second
	// DefaultSecurityInterval is the time between two reads of each
	// followed database's `_security` and `_revs_limit` at the source (see
	// SyncOptions.SecurityInterval).
	DefaultSecurityInterval = 5 * time.Minute
)

// SyncOptions configure Sync.
type SyncOptions struct {
	// Copy configures the initial catch-up of every database (as Copy)
	// and the catch-up copies of changed databases afterwards (those
	// skip Verify). Copy.Progress sees the initial catch-up only.
	Copy CopyOptions
	// PollInterval is the time between two listings of a source without
	// `_db_updates` (`_all_dbs`, then each database's update_seq, batched
	// in `_dbs_info` where the server has it). Zero: DefaultPollInterval.
	PollInterval time.Duration
	// Poll watches the source by listing it every PollInterval even
	// where it has `_db_updates`.
	Poll bool
	// Heartbeat is the `_db_updates` feed's heartbeat. Zero:
	// couch.DefaultDBUpdatesHeartbeat (10 s).
	Heartbeat time.Duration
	// RetryInterval is the first wait before a failed database is tried
	// again (then doubled, at most a minute). Zero: DefaultRetryInterval.
	RetryInterval time.Duration
	// BehindAfter: a database with a change noticed and not written for
	// this long is reported behind (log line, metrics, status), and
	// caught up once written. Zero: DefaultBehindAfter.
	BehindAfter time.Duration
	// SecurityInterval is the time between two reads of the `_security`
	// and `_revs_limit` of each database the run has copied, at the
	// source (two GETs per database per interval, one database at a
	// time); a change is written to the target. CouchDB announces a
	// change of either neither in `_db_updates` nor in the database's
	// `_changes`, so nothing else carries it while the run follows.
	// Zero: DefaultSecurityInterval; negative: never (they are then
	// copied only when a database is copied from the beginning).
	SecurityInterval time.Duration
	// DeleteMissing deletes the target's copy of a database deleted on
	// the source (seen by the watch, or, for one deleted while no run
	// went on, found at the start: a target database that holds this
	// source's checkpoint or claim and that the source lacks; without
	// DeleteMissing it is reported), and of one deleted and created again there (seen
	// deleted by the watch, recreated by its instance or seq, or found
	// so by its checkpoint: a recreation while no run went on, or during
	// a gap in the watch) before the new one is copied into a fresh
	// target database. Without it the
	// deletion is only reported and the target keeps its copy (a new
	// database under the name is copied next to the old documents).
	DeleteMissing bool
	// Metrics, if set, receives the run's metrics and status.
	Metrics *metrics.Set
	// Event, if set, hears of what happens, from Sync's goroutines (it
	// must not block): see SyncEvent.
	Event func(SyncEvent)
}

// Sync keeps the target server a copy of the source server until ctx
// ends: it copies every selected database once (as Copy), then watches
// which databases change and copies only those again, each catch-up
// incremental from its checkpoint, under the same scheduler and adaptive
// limiters as Copy. Copy.Selection, its Shard included, decides which
// databases are the run's, at the catch-up and for every database the
// watch names afterwards (changed, new, deleted): n runs given shards
// 0/n .. n-1/n each copy their own databases only (an empty shard is
// no error).
//
// Each database's replication is kept open after its copy (a
// replicate.Session: replication id, checkpoint state, seq reached), so
// that a catch-up ("wake") costs only what its changes need: `_changes`
// from the seq reached (new documents inline), `_revs_diff` and
// `_bulk_get` for updated ones, `_bulk_docs`. A wake writes no
// checkpoint: a database's checkpoint is written Copy.Engine.
// CheckpointInterval after the wake that moved it (one at a time, so
// checkpoints never crowd out wakes) and, for every database, when Sync
// returns. A database deleted or created on the source (its
// `_db_updates` rows; when polled: another instance_start_time, an
// integer update_seq gone back, or its first revision gone), or any
// database after a gap in the watch, is opened again at its next wake:
// its checkpoint is read and judged as by a one-shot copy (a recreated
// database starts over; with DeleteMissing, in a fresh target database,
// as at the catch-up when the run starts).
//
// No feed is held per database: a CouchDB source is watched through one
// `GET /_db_updates?feed=continuous` (resumed from its last row after a
// failure; from "now" plus every database marked changed when no row was
// seen); a source without it (PouchDB Server) is listed every
// PollInterval. A changed database has at most one catch-up waiting; one
// changed while its catch-up runs gets one more run after it. New
// databases are created on the target and copied; a database deleted on
// the source is reported (EventDeleted, SyncSummary.Deleted) and kept on
// the target unless DeleteMissing. A failed catch-up is retried after
// RetryInterval (doubling).
//
// Sync returns when ctx ends: the running copies and every database
// with unrecorded progress write their final checkpoints, and the error
// matches ctx.Err(). It also returns, stopping the run, when a server
// refuses a whole request for lack of rights (an error matching
// replicate.ErrDenied: a changed password, a member removed; at either
// end, from a catch-up, the watch, a checkpoint or a `_security` read):
// it is not retried, since every try would be one more failed login,
// which a server that locks accounts answers by locking it. The error
// then matches replicate.ErrDenied, and SyncSummary.Interrupted is
// false. A document refused by a validate_doc_update (a 403 for one
// document) is no such refusal: it is counted in DocWriteFailures and
// tried again at the next wake. Any other error before that
// means nothing is running (bad options, the source cannot be listed).
func Sync(ctx context.Context, src, dst *Endpoint, o SyncOptions) (*SyncSummary, error) {
	if err := opened(src, dst); err != nil {
		return nil, err
	}
	if err := CheckDistinct(src, dst); err != nil {
		return nil, err
	}
	if src.Kind() != KindServer || dst.Kind() != KindServer {
		return nil, optionErr("sync: %s to %s: both must be server URLs", src, dst)
	}
	co, err := copyDefaults(o.Copy)
	if err != nil {
		return nil, err
	}
	o.Copy = co
	if w := sameUUIDWarning(src, dst); w != "" {
		o.Copy.logf("warning: %s", w)
	}
	// A database whose checkpoint shows its source deleted and created
	// again since (found at the start, or reopened after a gap in the
	// watch) is handled as one the watch saw so: its copies fail with
	// replicate.ErrSourceRecreated, and startOver deletes the target's
	// old copy.
	o.Copy.Engine.StopIfSourceRecreated = o.DeleteMissing
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	if o.BehindAfter <= 0 {
		o.BehindAfter = DefaultBehindAfter
	}
	if o.SecurityInterval == 0 {
		o.SecurityInterval = DefaultSecurityInterval
	}
	if err := o.Copy.Selection.Validate(); err != nil {
		return nil, err
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	// halt stops the run on a refusal for lack of rights (see refused).
	ctx, halt := context.WithCancel(ctx)
	defer halt()
	s := &syncer{o: o, halt: halt, src: src, dst: dst, ssrv: src.couch.Server, tsrv: dst.couch.Server,
		sel: o.Copy.Selection, dbs: map[string]*syncDB{}, wake: make(chan struct{}, 1),
		budget: replicate.NewBudget(o.Copy.Engine.MaxInflightBytes), t0: time.Now()}
	maxDBs := o.Copy.MaxDBs
	if maxDBs <= 0 {
		maxDBs = DefaultMaxDBs
	}
	s.slots = make(chan struct{}, maxDBs)
	s.sum.Failing = map[string]string{}
	for role, ep := range map[string]*Endpoint{"source": src, "target": dst} {
		srv, lim := ep.couch.Server, ep.limiter
		o.Metrics.AddHost(role, func() metrics.HostStats {
			h := metrics.HostStats{Requests: srv.Stats.Requests.Load(), Retries: srv.Stats.Retries.Load(), Throttled: srv.Stats.Throttled.Load()}
			if lim != nil {
				h.InFlight = lim.l.InFlight()
				_, _, h.Limit = lim.l.Load()
				h.Overloads = lim.l.Stats().Overloads
			}
			return h
		})
	}

	// The target's requests are retried for minutes when it stops
	// answering: the log says when it is lost and when it is back.
	defer s.tsrv.WatchReach(s.targetReach)()
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var bg sync.WaitGroup
	defer bg.Wait()
	// The watch starts before the catch-up: a change made while the
	// catch-up runs is caught one way or the other.
	mode := make(chan string, 1)
	bg.Go(func() { s.watch(wctx, mode) })
	select {
	case m := <-mode:
		s.setMode(m)
	case <-ctx.Done():
		return s.end(ctx.Err())
	}
	s.event(SyncEvent{Kind: EventWatching, Detail: s.sum.Mode})

	sel := o.Copy.Selection
	sel.Sharded = true // none yet is fine: they are waited for
	dbs, skipped, err := selectDBs(ctx, src, sel, "source")
	if err != nil {
		if s.deniedErr() != nil {
			return s.end(err)
		}
		return nil, err
	}
	if err := distinctTargets(s.tsrv, nil, "copied", dbs); err != nil {
		return nil, err
	}
	onTarget := listTarget(ctx, s.tsrv, &RunControl{}) // a failure: every database asked for
	s.goneWhileStopped(ctx, dbs, onTarget)
	s.mu.Lock()
	for _, n := range dbs {
		s.dbLocked(n).running = true // the catch-up's
	}
	s.mu.Unlock()
	j := o.Copy.job(s.ssrv, s.tsrv, s.budget, onTarget)
	j.observer, j.keep = s.observer, s.keep
	o.Copy.Progress.Start(len(dbs), NewStallWatch(src, dst).Waiting)
	job := j.fleetJob()
	sum, runErr := fleet.Run(ctx, dbs, func(ctx context.Context, name string, p DBProgress) (fleet.DBResult, error) {
		m := o.Metrics.DB(name)
		m.BeginRun(false)
		r, err := job(ctx, name, p)
		if errors.Is(err, replicate.ErrSourceRecreated) {
			r, err = s.startOver(ctx, name, err, func() (fleet.DBResult, error) { return job(ctx, name, p) })
		}
		s.ended(ctx, name, r, nil, err, time.Time{}, false)
		return r, err
	}, fleet.Options{Limiters: limiters(src, dst), MaxDBs: o.Copy.MaxDBs, Fixed: o.Copy.Fixed,
		IdealDuration: o.Copy.IdealDuration, Progress: o.Copy.Progress, Logger: o.Copy.Logger})
	if w := sameUUIDWarning(src, dst); w != "" {
		sum.Warnings = append(sum.Warnings, w)
	}
	sum.LeftOut = append(skipped, sum.LeftOut...)
	s.sum.CatchUp = &sum
	for _, r := range sum.DBs {
		if r.Status == fleet.StatusNotStarted {
			s.mu.Lock()
			s.dbLocked(r.Name).running = false
			s.mu.Unlock()
		}
	}
	if runErr != nil {
		s.checkpointAll(ctx)
		if s.deniedErr() != nil {
			return s.end(runErr)
		}
		return s.finish(), fmt.Errorf("sync: %w", runErr)
	}
	if s.deniedErr() != nil {
		// refused during the catch-up: nothing is followed
		s.checkpointAll(ctx)
		return s.end(ctx.Err())
	}
	o.Metrics.SetCaughtUp()
	s.event(SyncEvent{Kind: EventCaughtUp})
	o.Copy.logf("initial copy done: %d %s (%d ok, %d partial, %d failed); following the source (%s)",
		sum.DBsTotal, plural(int64(sum.DBsTotal), "database"), sum.DBsOK, sum.DBsPartial, sum.DBsFailed, s.sum.Mode)

	bg.Go(func() { s.watchBehind(wctx) })
	bg.Go(func() { s.checkpointLoop(wctx) })
	bg.Go(func() { s.securityLoop(wctx) })
	s.dispatch(ctx)
	s.checkpointAll(ctx)
	return s.end(ctx.Err())
}

// end is what Sync returns once the run has started: the refusal that
// stopped it (see refused), or err (ctx's end).
func (s *syncer) end(err error) (*SyncSummary, error) {
	sum := s.finish()
	if denied := s.deniedErr(); denied != nil {
		sum.Interrupted = false
		return sum, denied
	}
	return sum, err
}

// refused stops the run, and reports true, when err is a refusal of a
// whole request for lack of rights (replicate.ErrDenied: HTTP 401 or 403
// for the request, a wrong password or a member removed, at either
// end): retrying it would be one failed login after another, which a
// server that locks accounts (CouchDB 3.4 and later) answers by locking
// it. what names where it happened ("source", a database). A refusal of
// one document (a validate_doc_update's 403) is a failure of that
// document, not an error, and a refused `_revs_limit` or `_security`
// (replicate.ErrMetadataRefused) a warning: neither is one. The first
// refusal is the run's error.
func (s *syncer) refused(what string, err error) bool {
	if err == nil || !errors.Is(err, replicate.ErrDenied) || errors.Is(err, replicate.ErrMetadataRefused) {
		return false
	}
	s.mu.Lock()
	if s.denied == nil {
		s.denied = fmt.Errorf("%s: %w (not retried: stopping)", what, err)
	}
	s.mu.Unlock()
	s.halt()
	return true
}

// deniedErr is the refusal that stopped the run (nil: none).
func (s *syncer) deniedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.denied
}

// copyDefaults checks and completes CopyOptions as Copy does.
func copyDefaults(o CopyOptions) (CopyOptions, error) {
	if err := checkRun(o.RunControl, o.Engine, o.Q, o.N); err != nil {
		return o, err
	}
	switch o.Verify {
	case "":
		o.Verify = VerifyCheap
	case VerifyCheap, VerifyFull, VerifyNone:
	default:
		return o, optionErr("--verify %q: want cheap, full or none", o.Verify)
	}
	if o.Progress == nil {
		o.Progress = NoProgress
	}
	if o.Selection.Skip == nil {
		o.Selection.Skip = ReplicateSkip
	}
	return o, nil
}

type syncer struct {
	o          SyncOptions
	src, dst   *Endpoint
	ssrv, tsrv *couch.Server
	sel        Selection // the databases that are this run's (see owns)
	budget     *replicate.Budget
	slots      chan struct{} // databases in flight, all waves together
	t0         time.Time
	// halt ends the run (Sync's context) when a request is refused for
	// lack of rights; denied (under mu) is that refusal.
	halt func()

	mu     sync.Mutex
	dbs    map[string]*syncDB
	queue  []string
	wake   chan struct{}
	sum    SyncSummary
	denied error
}

func (s *syncer) observer(name string) replicate.Observer { return s.o.Metrics.DB(name) }

// everyTick calls fn every d until ctx ends (the first call after d).
func everyTick(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn()
	}
}
