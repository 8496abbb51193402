package sofa

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/dbcopy"
	"github.com/sofadb/sofa/internal/progress"
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
	// DeleteMissing deletes the target's copy of a database deleted on
	// the source. Without it the deletion is only reported and the
	// target keeps its copy.
	DeleteMissing bool
	// Metrics, if set, receives the run's metrics and status.
	Metrics *metrics.Set
	// Event, if set, hears of what happens, from Sync's goroutines (it
	// must not block): see SyncEvent.
	Event func(SyncEvent)
}

// SyncEventKind says what a SyncEvent reports.
type SyncEventKind string

// Kinds of SyncEvent.
const (
	// EventWatching: the source is watched (Detail: db_updates or poll);
	// changes from now on are caught.
	EventWatching SyncEventKind = "watching"
	// EventCaughtUp: the initial catch-up of every database ended.
	EventCaughtUp SyncEventKind = "caught_up"
	// EventSynced: a catch-up copy of DB ended (Err nil: everything the
	// source had when it started is on the target).
	EventSynced SyncEventKind = "synced"
	// EventDeleted: DB was deleted on the source (Detail says whether
	// the target's copy was deleted too).
	EventDeleted SyncEventKind = "deleted"
	// EventBehind and EventCaughtUpDB: DB fell behind, or caught up again.
	EventBehind     SyncEventKind = "behind"
	EventCaughtUpDB SyncEventKind = "db_caught_up"
	// EventReconnect: the server's watch failed (Err) and is retried.
	EventReconnect SyncEventKind = "reconnect"
	// EventPolled: a listing of the source ended (poll mode; Detail: the
	// number of databases seen).
	EventPolled SyncEventKind = "polled"
)

// SyncEvent is one thing a Sync run did.
type SyncEvent struct {
	Kind   SyncEventKind
	DB     string
	Err    error
	Detail string
	// DocsWritten of the catch-up copy (EventSynced).
	DocsWritten int64
}

// SyncSummary is what a Sync run did.
type SyncSummary struct {
	// CatchUp is the initial catch-up of every database (as Copy's).
	CatchUp *Summary `json:"catch_up"`
	// Mode is how the source was watched: db_updates or poll.
	Mode string `json:"mode"`
	// Runs counts catch-up copies after the initial one; RunsFailed
	// those that failed (each retried).
	Runs       int64 `json:"runs"`
	RunsFailed int64 `json:"runs_failed"`
	// DocsWritten and DocWriteFailures are the totals of those runs.
	DocsWritten      int64 `json:"docs_written"`
	DocWriteFailures int64 `json:"doc_write_failures"`
	// Created are databases that appeared on the source while running;
	// Deleted those deleted on it (DeletedOnTarget: also deleted on the
	// target, DeleteMissing).
	Created         []string `json:"created,omitempty"`
	Deleted         []string `json:"deleted,omitempty"`
	DeletedOnTarget []string `json:"deleted_on_target,omitempty"`
	// Failing maps the databases whose last copy failed to its error.
	Failing map[string]string `json:"failing,omitempty"`
	// Reconnects counts failures of the server's watch.
	Reconnects int64          `json:"reconnects"`
	Duration   fleet.Duration `json:"duration"`
	// Interrupted: the run ended on ctx (always, unless it failed to
	// start).
	Interrupted bool `json:"interrupted"`
}

// Sync keeps the target server a copy of the source server until ctx
// ends: it copies every selected database once (as Copy), then watches
// which databases change and copies only those again, each catch-up
// incremental from its checkpoint, under the same scheduler and adaptive
// limiters as Copy.
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
// Sync returns when ctx ends: the running copies write their final
// checkpoints, and the error matches ctx.Err(). An error before that
// means nothing is running (bad options, the source cannot be listed).
func Sync(ctx context.Context, src, dst *Endpoint, o SyncOptions) (*SyncSummary, error) {
	if src.Kind() != KindServer || dst.Kind() != KindServer {
		return nil, optionErr("sync: %s to %s: both must be server URLs", src, dst)
	}
	co, err := copyDefaults(o.Copy)
	if err != nil {
		return nil, err
	}
	o.Copy = co
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	if o.BehindAfter <= 0 {
		o.BehindAfter = DefaultBehindAfter
	}
	if err := o.Copy.Selection.filter().Validate(); err != nil {
		return nil, &OptionError{Err: err}
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	s := &syncer{o: o, src: src, dst: dst, ssrv: src.couch.Server, tsrv: dst.couch.Server,
		filter: o.Copy.Selection.filter(), dbs: map[string]*syncDB{}, wake: make(chan struct{}, 1),
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
		return s.finish(), ctx.Err()
	}
	s.event(SyncEvent{Kind: EventWatching, Detail: s.sum.Mode})

	sel := o.Copy.Selection
	sel.Sharded = true // none yet is fine: they are waited for
	dbs, err := SelectDBs(ctx, src, sel, "source")
	if err != nil {
		return nil, err
	}
	var onTarget map[string]bool
	if tnames, err := fleet.ListDBs(ctx, s.tsrv, 1000); err == nil {
		onTarget = make(map[string]bool, len(tnames))
		for _, n := range tnames {
			onTarget[n] = true
		}
	}
	s.mu.Lock()
	for _, n := range dbs {
		s.dbLocked(n).running = true // the catch-up's
	}
	s.mu.Unlock()
	c := &copier{o: o.Copy, budget: s.budget, observer: s.observer}
	o.Copy.Progress.Start(len(dbs), NewStallWatch(src, dst).Waiting)
	job := withProgress(o.Copy.Progress, c.dbJob(s.ssrv, s.tsrv, onTarget))
	sum, runErr := fleet.Run(ctx, dbs, func(ctx context.Context, name string, p *progress.DB) (fleet.DBResult, error) {
		m := o.Metrics.DB(name)
		m.BeginRun()
		r, err := job(ctx, name, p)
		s.ended(ctx, name, r, nil, err, time.Time{})
		return r, err
	}, fleet.Options{Limiters: limiters(src, dst), MaxDBs: o.Copy.MaxDBs, Fixed: o.Copy.Fixed,
		IdealDuration: o.Copy.IdealDuration, Logger: o.Copy.Logger})
	s.sum.CatchUp = &sum
	for _, r := range sum.DBs {
		if r.Status == fleet.StatusNotStarted {
			s.mu.Lock()
			s.dbLocked(r.Name).running = false
			s.mu.Unlock()
		}
	}
	if runErr != nil {
		return s.finish(), fmt.Errorf("sync: %w", runErr)
	}
	o.Metrics.SetCaughtUp()
	s.event(SyncEvent{Kind: EventCaughtUp})
	o.Copy.logf("initial copy done: %d databases (%d ok, %d partial, %d failed); following the source (%s)",
		sum.DBsTotal, sum.DBsOK, sum.DBsPartial, sum.DBsFailed, s.sum.Mode)

	bg.Go(func() { s.watchBehind(wctx) })
	s.dispatch(ctx)
	return s.finish(), ctx.Err()
}

// copyDefaults checks and completes CopyOptions as Copy does.
func copyDefaults(o CopyOptions) (CopyOptions, error) {
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
	filter     fleet.Filter
	budget     *replicate.Budget
	slots      chan struct{} // databases in flight, all waves together
	t0         time.Time

	mu    sync.Mutex
	dbs   map[string]*syncDB
	queue []string
	wake  chan struct{}
	sum   SyncSummary
}

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

func (s *syncer) observer(name string) replicate.Observer { return s.o.Metrics.DB(name) }

func (s *syncer) event(e SyncEvent) {
	if s.o.Event != nil {
		s.o.Event(e)
	}
}

func (s *syncer) setMode(m string) {
	s.mu.Lock()
	s.sum.Mode = m
	s.mu.Unlock()
	s.o.Metrics.SetMode(m)
}

// mark says name changed at time at: it is queued unless it already is;
// a running one gets one more run.
func (s *syncer) mark(name string, at time.Time) {
	if !s.filter.Match(name) {
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

// includesSystem reports whether an Include pattern that begins with "_"
// names the system database name.
func (s *syncer) includesSystem(name string) bool {
	for _, p := range s.filter.Include {
		if ok, _ := path.Match(p, name); ok && strings.HasPrefix(p, "_") {
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
		s.mark(n, now)
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

// wakeJob catches one changed database up: the whole copy (create,
// properties) the first time, a plain incremental replication after.
func (s *syncer) wakeJob(ctx context.Context, name string, _ *progress.DB) (fleet.DBResult, error) {
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		return fleet.DBResult{Name: name}, ctx.Err()
	}
	s.mu.Lock()
	d := s.dbs[name]
	noticed, synced := d.noticed, d.synced
	s.mu.Unlock()
	m := s.o.Metrics.DB(name)
	m.BeginRun()
	var (
		r   fleet.DBResult
		res *replicate.Result
		err error
	)
	if synced {
		res, err = s.replicateOnce(ctx, name, m)
		r.Name = name
		dbcopy.FillResult(&r, res)
	} else {
		o := s.o.Copy
		o.Verify = VerifyNone
		c := &copier{o: o, budget: s.budget, observer: s.observer}
		r, err = withProgress(NoProgress, c.dbJob(s.ssrv, s.tsrv, nil))(ctx, name, nil)
	}
	s.mu.Lock()
	s.sum.Runs++
	s.sum.DocsWritten += r.DocsWritten
	s.sum.DocWriteFailures += r.DocWriteFailures
	if err != nil && ctx.Err() == nil {
		s.sum.RunsFailed++
	}
	s.mu.Unlock()
	s.ended(ctx, name, r, res, err, noticed)
	return r, err
}

// replicateOnce is the incremental catch-up of a database this run has
// copied before: its target exists and holds the checkpoint.
func (s *syncer) replicateOnce(ctx context.Context, name string, m *metrics.DB) (*replicate.Result, error) {
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
	res, err := replicate.Run(ctx, sdb, tdb, opts)
	if err != nil && errors.Is(err, replicate.ErrNotFound) {
		if _, terr := tdb.Info(ctx); errors.Is(terr, replicate.ErrNotFound) {
			// The target's copy was deleted: the next run creates it.
			s.mu.Lock()
			s.dbs[name].synced = false
			s.mu.Unlock()
		}
	}
	return res, err
}

// ended records the end of a copy of name (initial or catch-up): the
// source's deletion, a failure to retry, or a success; then one more run
// if it changed meanwhile.
func (s *syncer) ended(ctx context.Context, name string, r fleet.DBResult, res *replicate.Result, err error, noticed time.Time) {
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
	if d.deleted {
		d.deleted = false
		s.sum.Created = append(s.sum.Created, name)
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
	} else {
		if !d.synced && s.sum.CatchUp != nil && !slices.Contains(s.sum.Created, name) && !s.inCatchUp(name) {
			s.sum.Created = append(s.sum.Created, name)
		}
		d.synced = true
		d.retry = 0
		d.noticed = againAt // zero, or a change noticed while it ran
		delete(s.sum.Failing, name)
	}
	s.mu.Unlock()
	s.event(SyncEvent{Kind: EventSynced, DB: name, Err: err, DocsWritten: r.DocsWritten})
	switch {
	case errors.Is(err, dbcopy.ErrNotEmpty):
		// Not a passing fault: retried at its next change only.
		s.o.Copy.logf("%s: %v; skipped until it changes again", name, err)
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
	for _, r := range s.sum.CatchUp.DBs {
		if r.Name == name {
			return true
		}
	}
	return false
}

// sourceGone asks the source whether name still exists.
func (s *syncer) sourceGone(ctx context.Context, name string) bool {
	_, err := s.ssrv.DB(name).Info(ctx)
	return errors.Is(err, replicate.ErrNotFound)
}

// deletedOnSource reports a database deleted on the source and, with
// DeleteMissing, deletes the target's copy.
func (s *syncer) deletedOnSource(ctx context.Context, name string) {
	s.mu.Lock()
	d := s.dbLocked(name)
	d.running, d.again, d.synced, d.noticed, d.againAt = false, false, false, time.Time{}, time.Time{}
	already := d.deleted
	d.deleted = true
	if !already {
		s.sum.Deleted = append(s.sum.Deleted, name)
	}
	delete(s.sum.Failing, name)
	s.mu.Unlock()
	if already {
		return
	}
	detail := "kept on the target"
	if s.o.DeleteMissing {
		if err := s.tsrv.DeleteDB(ctx, name); err != nil {
			detail = fmt.Sprintf("deleting it on the target failed: %v", err)
		} else {
			detail = "deleted on the target too"
			s.mu.Lock()
			s.sum.DeletedOnTarget = append(s.sum.DeletedOnTarget, name)
			s.mu.Unlock()
		}
	}
	s.o.Copy.logf("%s: deleted on the source; %s", name, detail)
	if s.o.Copy.Logger != nil {
		s.o.Copy.Logger.Warn("database deleted on the source", "db", name, "target", detail)
	}
	s.event(SyncEvent{Kind: EventDeleted, DB: name, Detail: detail})
}

// watch follows the source's `_db_updates`, or polls it, until ctx ends.
// It sends the mode on ready once changes are caught.
func (s *syncer) watch(ctx context.Context, ready chan<- string) {
	if s.o.Poll {
		s.poll(ctx, ready)
		return
	}
	since := "now"
	first := true
	wait := 250 * time.Millisecond
	for {
		err := s.ssrv.DBUpdates(ctx, since, s.o.Heartbeat, func() {
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
			s.mark(u.DBName, time.Now())
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, couch.ErrNoDBUpdates) {
			if first {
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
		s.o.Copy.logf("source: %v; reconnecting in %s", err, wait)
		if sleepCtx(ctx, wait) != nil {
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
		if ctx.Err() != nil {
			return
		}
		s.o.Metrics.FeedReconnected(err)
		s.o.Copy.logf("source: list databases: %v; retrying in %s", err, s.o.PollInterval)
		if sleepCtx(ctx, s.o.PollInterval) != nil {
			return
		}
		prev, err = s.snapshot(ctx)
	}
	ready <- "poll"
	t := time.NewTicker(s.o.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur, err := s.snapshot(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.o.Metrics.FeedReconnected(err)
			s.mu.Lock()
			s.sum.Reconnects++
			s.mu.Unlock()
			s.event(SyncEvent{Kind: EventReconnect, Err: err})
			s.o.Copy.logf("source: poll: %v", err)
			continue
		}
		s.event(SyncEvent{Kind: EventPolled, Detail: fmt.Sprint(len(cur))})
		now := time.Now()
		for n, v := range cur {
			if prev[n] != v {
				s.mark(n, now)
			}
		}
		for n := range prev {
			if _, ok := cur[n]; !ok {
				s.mark(n, now)
			}
		}
		prev = cur
	}
}

// snapshot maps each selected database of the source to its update_seq
// and instance: `_all_dbs`, then `_dbs_info` in batches of 100 where the
// server has it, one `GET /db` per database where not.
func (s *syncer) snapshot(ctx context.Context) (map[string]string, error) {
	names, err := fleet.ListDBs(ctx, s.ssrv, 1000)
	if err != nil {
		return nil, err
	}
	names = s.filter.Apply(names)
	out := make(map[string]string, len(names))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2*couch.DBsInfoMax)
	for _, n := range names {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			info, err := s.ssrv.DB(n).InfoBatched(ctx)
			v := info.UpdateSeq.String() + "|" + info.InstanceStart
			if err != nil {
				if !errors.Is(err, replicate.ErrNotFound) {
					v = "?" // unknown: looked at as changed
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

// watchBehind looks every second for databases whose oldest unwritten
// change is older than BehindAfter, and for those caught up again.
func (s *syncer) watchBehind(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		var edges []SyncEvent
		s.mu.Lock()
		for n, d := range s.dbs {
			behind := !d.noticed.IsZero() && now.Sub(d.noticed) > s.o.BehindAfter
			if behind == d.behind {
				continue
			}
			d.behind = behind
			s.o.Metrics.DB(n).SetBehind(behind)
			if behind {
				edges = append(edges, SyncEvent{Kind: EventBehind, DB: n, Detail: fmt.Sprintf("a change is waiting since %s", now.Sub(d.noticed).Round(time.Second))})
			} else {
				edges = append(edges, SyncEvent{Kind: EventCaughtUpDB, DB: n})
			}
		}
		s.mu.Unlock()
		for _, e := range edges {
			if e.Kind == EventBehind {
				s.o.Copy.logf("%s: behind: %s", e.DB, e.Detail)
			} else {
				s.o.Copy.logf("%s: caught up", e.DB)
			}
			if s.o.Copy.Logger != nil {
				s.o.Copy.Logger.Info("database "+string(e.Kind), "db", e.DB, "detail", e.Detail)
			}
			s.event(e)
		}
	}
}

func (s *syncer) finish() *SyncSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := s.sum
	sum.Failing = maps.Clone(s.sum.Failing)
	sum.Duration = fleet.Duration(time.Since(s.t0))
	sum.Interrupted = true
	return &sum
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
