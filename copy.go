package sofa

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/dbcopy"
	"github.com/sofadb/sofa/internal/progress"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/verify"
)

// Summary is the result of a many-database operation: one result per
// database (status ok, partial, failed, interrupted or not_started) and
// the totals. Summary.Complete reports whether every database is ok.
type Summary = fleet.Summary

// DBResult is the outcome of one database.
type DBResult = fleet.DBResult

// VerifyMode says how Copy checks each database after copying it.
type VerifyMode string

// Values of CopyOptions.Verify.
const (
	// VerifyCheap compares doc counts; on a mismatch every document is
	// compared as with VerifyFull.
	VerifyCheap VerifyMode = "cheap"
	// VerifyFull compares every document and leaf revision; a copy found
	// different is copied once more from the start and compared again,
	// and each remaining difference is reported as a failure.
	VerifyFull VerifyMode = "full"
	// VerifyNone checks nothing.
	VerifyNone VerifyMode = "none"
)

// DefaultMaxDBs caps databases copied at once when CopyOptions.MaxDBs is
// zero.
const DefaultMaxDBs = fleet.DefaultMaxDBs

// ReplicateSkip are the databases a server copy leaves out unless
// Selection.Include names them (_users unless WithoutUsers).
var ReplicateSkip = fleet.ReplicateSkip

// CopyOptions configure Copy.
type CopyOptions struct {
	// Engine are the one-database engine's options, used for every
	// database (Copy sets the per-database fields: counters, metadata,
	// budget, warnings). Engine.MaxInflightBytes is shared by all
	// databases in flight.
	Engine replicate.Options
	// Selection picks the source's databases (Skip: ReplicateSkip when
	// nil).
	Selection Selection
	// ReuseExisting writes into existing non-empty target databases
	// (without it they fail, unless they hold this copy's checkpoint or
	// claim).
	ReuseExisting bool
	// Q and N are the shards and replicas of created databases (zero:
	// the target's default).
	Q, N int
	// Verify checks each database after it is copied; "" is VerifyCheap.
	Verify VerifyMode
	// SourceCheckpoints writes checkpoints on the source too, as
	// CouchDB's replicator does (default: the target only, so read access
	// to the source is enough).
	SourceCheckpoints bool
	// RunControl: databases at once, progress and logs.
	RunControl
}

// Copy copies every selected database of the server src to the server
// dst, many at once under the adaptive concurrency controller: each
// target database is created with the source's properties (or an
// existing one accepted: empty, holding this copy's checkpoint or claim,
// or ReuseExisting), claimed before any document is written, copied with
// `_revs_limit` first and `_security` last, then checked (Verify).
//
// The error is non-nil when nothing was copied (bad options: an
// *OptionError; the source's databases could not be listed) or when ctx
// was cancelled (then it matches ctx.Err() and the Summary says which
// databases were interrupted; checkpoints are written, a rerun resumes).
// Otherwise per-database outcomes are in the Summary: Complete reports
// whether all are ok.
func Copy(ctx context.Context, src, dst *Endpoint, o CopyOptions) (*Summary, error) {
	if src.Kind() != KindServer || dst.Kind() != KindServer {
		return nil, optionErr("copy: %s to %s: both must be server URLs (one database: package replicate)", src, dst)
	}
	switch o.Verify {
	case "":
		o.Verify = VerifyCheap
	case VerifyCheap, VerifyFull, VerifyNone:
	default:
		return nil, optionErr("--verify %q: want cheap, full or none", o.Verify)
	}
	if o.Selection.Skip == nil {
		o.Selection.Skip = ReplicateSkip
	}
	dbs, err := SelectDBs(ctx, src, o.Selection, "source")
	if err != nil {
		return nil, err
	}
	ssrv, tsrv := src.couch.Server, dst.couch.Server
	// The target's databases, listed once: a database it lacks is created
	// straight away, without asking for it first (one request less per
	// database on a first run). Without the list every one is asked for.
	var onTarget map[string]bool
	if tnames, err := fleet.ListDBs(ctx, tsrv, 1000); err == nil {
		onTarget = make(map[string]bool, len(tnames))
		for _, n := range tnames {
			onTarget[n] = true
		}
	} else {
		o.logf("target: list databases: %v (asking for each database instead)", err)
	}
	c := &copier{o: o, budget: replicate.NewBudget(o.Engine.MaxInflightBytes)}
	sum, runErr := o.runDBs(ctx, dbs, c.dbJob(ssrv, tsrv, onTarget), NewStallWatch(src, dst).Waiting, src, dst)
	sum.RequestsByKind = map[string]map[string]int64{"source": ssrv.Stats.Kinds(), "target": tsrv.Stats.Kinds()}
	if runErr != nil {
		return &sum, fmt.Errorf("copy: %w", runErr)
	}
	return &sum, nil
}

// withProgress wraps job so that p hears of each database: Begin before
// it, End after it (failed as fleet.Run decides: an error not caused by
// the cancellation, or a panic).
func withProgress(p Progress, job dbJob) fleet.Job {
	return func(ctx context.Context, name string, _ *progress.DB) (r fleet.DBResult, err error) {
		d := &countedProgress{DBProgress: p.Begin(name)}
		ok := false
		defer func() {
			interrupted := ok && err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err())
			if ip, is := p.(InterruptedProgress); is && interrupted {
				ip.EndInterrupted(name, d.DBProgress)
				return
			}
			p.End(name, d.DBProgress, !ok || err != nil && !interrupted)
		}()
		r, err = job(ctx, name, d)
		ok = true
		if r.DocsRead == 0 && r.DocsWritten == 0 && r.Bytes == 0 {
			// nothing reported (stopped early): what progress was told
			r.DocsRead, r.DocsWritten = d.read.Load(), d.written.Load()
			r.DocWriteFailures, r.Bytes = d.failures.Load(), d.bytes.Load()
		}
		return r, err
	}
}

// countedProgress passes counters on and keeps their sums.
type countedProgress struct {
	DBProgress
	read, written, failures, bytes atomic.Int64
}

func (c *countedProgress) AddDocsRead(n int64) { c.read.Add(n); c.DBProgress.AddDocsRead(n) }
func (c *countedProgress) AddDocsWritten(n int64) {
	c.written.Add(n)
	c.DBProgress.AddDocsWritten(n)
}
func (c *countedProgress) AddDocWriteFailures(n int64) {
	c.failures.Add(n)
	c.DBProgress.AddDocWriteFailures(n)
}
func (c *countedProgress) AddBytes(n int64) { c.bytes.Add(n); c.DBProgress.AddBytes(n) }

// dbJob is the job of one database; its progress argument is a DBProgress
// passed through withProgress.
type dbJob func(ctx context.Context, name string, p DBProgress) (fleet.DBResult, error)

type copier struct {
	o      CopyOptions
	budget *replicate.Budget
	// observer, if set, gives each database's replicate.Observer (Sync's
	// metrics).
	observer func(db string) replicate.Observer
	// keep, if set, receives the replication of each database copied
	// with no error, kept open for later passes (Sync): the database is
	// copied by a replicate.Session's first pass and its checkpoint
	// instead of replicate.Run.
	keep func(db string, s *replicate.Session)
}

// replicate copies sdb to tdb: replicate.Run, or with keep a Session's
// first pass and its checkpoint (the same requests), the Session
// returned for keep.
func (c *copier) replicate(ctx context.Context, sdb, tdb *couch.DB, opts replicate.Options) (*replicate.Result, *replicate.Session, error) {
	if c.keep == nil {
		res, err := replicate.Run(ctx, sdb, tdb, opts)
		return res, nil, err
	}
	sess, err := replicate.Open(ctx, sdb, tdb, opts)
	if err != nil {
		return nil, nil, err
	}
	res, err := sess.Pass(ctx)
	if err != nil {
		return res, nil, err // an interrupted pass wrote its checkpoint
	}
	if err := sess.Checkpoint(ctx); err != nil {
		return res, nil, err
	}
	res.EndSeq = sess.Seq()
	return res, sess, nil
}

// dbJob copies one database: create the target with the source's
// properties (or accept an existing one that is empty, holds this job's
// checkpoint, or ReuseExisting), copy documents with `_revs_limit` set
// first and `_security` last, then check it.
//
// onTarget, when not nil, holds the names the target listed at the start.
func (c *copier) dbJob(src, tgt *couch.Server, onTarget map[string]bool) dbJob {
	return func(ctx context.Context, name string, p DBProgress) (_ fleet.DBResult, err error) {
		r := fleet.DBResult{Name: name}
		sdb := src.DB(name)
		// Batched with the other jobs' (one _dbs_info where the server
		// has it).
		sinfo, err := sdb.InfoBatched(ctx)
		if err != nil {
			return r, fmt.Errorf("source: %w", err)
		}
		p.SetDocsTotal(sinfo.DocCount + sinfo.DelCount)
		pt, err := prepareTarget(ctx, tgt, name, sinfo, targetRules{
			Props:  couch.CreateOptions{Partitioned: sinfo.Partitioned, Q: c.o.Q, N: c.o.N},
			Absent: onTarget != nil && !onTarget[name],
			Reuse:  c.o.ReuseExisting || name == couch.UsersDB,
		})
		if err != nil {
			return r, dbcopy.AsInterrupted(ctx, err)
		}
		tdb := tgt.OpenDB(name, couch.DBOptions{Fresh: pt.Created})
		opts := c.o.Engine
		opts.CopyMetadata = true
		opts.SourceReadOnly = !c.o.SourceCheckpoints
		opts.SourceInfo = &sinfo
		if pt.Created {
			opts.TargetCreated = tdb.Created()
		}
		opts.Budget = c.budget
		if c.o.DebugLogf != nil {
			opts.Debug = func(format string, args ...any) { c.o.DebugLogf(name+": "+format, args...) }
		}
		opts.Counters = &replicate.Counters{}
		if c.observer != nil {
			opts.Observer = c.observer(name)
		}
		var warnMu sync.Mutex
		opts.Warn = func(s string) {
			c.o.logf("%s: %s", name, s)
			warnMu.Lock()
			r.Warnings = append(r.Warnings, s)
			warnMu.Unlock()
		}
		stop := dbcopy.FeedProgress(opts.Counters, p)
		res, sess, err := c.replicate(ctx, sdb, tdb, opts)
		stop()
		dbcopy.FillResult(&r, res)
		if err != nil {
			return r, err
		}
		if sess != nil {
			defer func() {
				if err == nil {
					c.keep(name, sess)
				}
			}()
		}
		if len(res.Failures) == 0 {
			// The counts read before the copy are a lower bound of what
			// the target must hold: the copy read the source's changes
			// feed to its end after reading them, so every document
			// counted then is on the target. No second GET /db: comparing
			// the seq reached with the update_seq read with the counts
			// does not work on CouchDB, which spells one position in
			// several ways and counts _security writes in update_seq.
			opts.Warn = func(s string) { c.o.logf("%s: %s", name, s) } // r is the caller's now
			if err := c.verifyCopy(ctx, sdb, tdb, opts, &sinfo, &r); err != nil {
				return r, err
			}
		}
		return r, nil
	}
}

// verifyCounts is the cheap check after each database: the target holds
// at least the source's live and deleted documents (the source may have
// grown meanwhile, the target may have had more). s are the source's
// counts read before the copy.
func verifyCounts(ctx context.Context, tdb *couch.DB, s replicate.DBInfo) error {
	// Batched with the other databases' checks: one _dbs_info for many
	// where the server has it.
	t, err := tdb.InfoBatched(ctx)
	if err != nil {
		return fmt.Errorf("verify: target: %w", err)
	}
	if t.DelCountUnknown || s.DelCountUnknown {
		// PouchDB Server reports no doc_del_count: its absence is not a
		// zero, compare live documents only.
		if t.DocCount < s.DocCount {
			return fmt.Errorf("verify: target holds %d live documents, source %d (deleted ones not reported by one side)", t.DocCount, s.DocCount)
		}
		return nil
	}
	if t.DocCount+t.DelCount < s.DocCount+s.DelCount {
		return fmt.Errorf("verify: target holds %d documents (%d deleted), source %d (%d deleted)", t.DocCount, t.DelCount, s.DocCount, s.DelCount)
	}
	return nil
}

// verifyCopy checks one database after a copy that reported no failures.
// cheap compares doc counts and goes on to a full comparison only on a
// mismatch; full always compares every leaf revision. A copy found
// different is copied once more from the beginning of the source's
// changes feed (checkpoints ignored, so revisions the first pass skipped
// are found again; _revs_diff keeps it cheap) and compared again; what
// still differs is reported per document in r.Failures (error
// "verify_<kind>"), which marks the database partial. The target may hold
// more than the source (ReuseExisting): only what it lacks counts.
// srcCounts are the source's doc counts read before the copy.
func (c *copier) verifyCopy(ctx context.Context, sdb, tdb *couch.DB, opts replicate.Options, srcCounts *replicate.DBInfo, r *fleet.DBResult) error {
	switch c.o.Verify {
	case VerifyNone:
		return nil
	case VerifyCheap:
		err := verifyCounts(ctx, tdb, *srcCounts)
		if err == nil {
			return nil
		}
		c.o.logf("%s: %v; comparing every document", sdb.Name(), err)
	}
	vopts := verify.Options{Mode: verify.Full, Metadata: true, AllowExtra: true,
		LenientRevpos: tdb.Server().Vendor == couch.VendorPouchDB}
	rep, err := verify.Compare(ctx, sdb, tdb, vopts)
	if err != nil {
		return err
	}
	if rep.Equal() {
		return nil
	}
	c.o.logf("%s: %s after the copy; copying it once more", sdb.Name(), rep)
	opts.NoCheckpoints = true
	opts.Counters = &replicate.Counters{}
	res, err := replicate.Run(ctx, sdb, tdb, opts)
	dbcopy.FillResult(r, res)
	if err != nil {
		return err
	}
	if rep, err = verify.Compare(ctx, sdb, tdb, vopts); err != nil {
		return err
	}
	for _, d := range rep.Differences {
		r.Failures = append(r.Failures, replicate.DocError{ID: d.ID, Rev: d.Rev, Error: "verify_" + string(d.Kind), Reason: d.Detail})
	}
	if n := rep.Truncated(); n > 0 {
		r.Failures = append(r.Failures, replicate.DocError{Error: "verify", Reason: fmt.Sprintf("%d more differences not listed (run sofa verify --full)", n)})
	}
	return nil
}

// CopyDBOptions configure CopyDB.
type CopyDBOptions struct {
	// Engine are the engine's options; set Engine.Counters to watch the
	// copy as it goes, Engine.Warn and Engine.Debug to hear of it.
	// Engine.Continuous keeps following the source after the copy until
	// ctx is cancelled (Engine.FlushInterval, Engine.Log,
	// Engine.Observer); CopyDB then returns the Result with ctx.Err(),
	// the final checkpoint written.
	Engine replicate.Options
	// CreateTarget creates a missing target database with the source's
	// properties, `_revs_limit` and `_security`, claimed before any
	// document (a rerun after an interruption still sets them).
	CreateTarget bool
	// CopySecurity copies `_revs_limit` (before the documents) and
	// `_security` (after them) to an existing target.
	CopySecurity bool
	// SourceCheckpoints writes checkpoints on the source too.
	SourceCheckpoints bool
}

// ErrNoTarget: CopyDB into a missing database without CreateTarget.
var ErrNoTarget = errors.New("target database does not exist")

// CopyDB copies one database to another (both database endpoints) with
// the engine, creating the target when asked. The Result holds the
// replication id, the seqs, the counters and each revision not copied.
func CopyDB(ctx context.Context, src, dst *Endpoint, o CopyDBOptions) (*replicate.Result, error) {
	if src.Kind() != KindDatabase || dst.Kind() != KindDatabase {
		return nil, optionErr("copy: %s to %s: both must be database URLs", src, dst)
	}
	sdb := src.couch.Server.DB(src.couch.DBName)
	tdb := dst.couch.Server.DB(dst.couch.DBName)
	sinfo, err := sdb.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	opts := o.Engine
	opts.CopyMetadata = o.CopySecurity
	opts.SourceReadOnly = !o.SourceCheckpoints
	if _, err := tdb.Info(ctx); err != nil {
		if !errors.Is(err, replicate.ErrNotFound) {
			return nil, fmt.Errorf("target: %w", err)
		}
		if !o.CreateTarget {
			return nil, fmt.Errorf("target database %s does not exist (use --create-target)%.0w", tdb, ErrNoTarget)
		}
		meta, err := sdb.Metadata(ctx)
		if err != nil {
			return nil, fmt.Errorf("source: %w", err)
		}
		switch err := tdb.Server().CreateDB(ctx, tdb.Name(), couch.CreateOptions{Partitioned: meta.Partitioned}); {
		case err == nil:
			opts.TargetCreated = tdb.Created()
			opts.SourceMetadata = &meta
			// Claimed before any document: a rerun after an interruption
			// knows the database is its own and still owes it _security.
			if err := dbcopy.ClaimNew(ctx, sinfo, tdb); err != nil {
				return nil, err
			}
		case !errors.Is(err, couch.ErrExists):
			return nil, fmt.Errorf("target: %w", err)
		}
		opts.CopyMetadata = true
	} else if o.CreateTarget && dbcopy.Claimed(ctx, sinfo, tdb) {
		// Created by an earlier run of this copy that did not finish:
		// its properties are set like a created target's.
		opts.CopyMetadata = true
	}
	return replicate.Run(ctx, sdb, tdb, opts)
}
