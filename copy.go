package sofa

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/storage"
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
// *OptionError, also for two selected databases the target server keeps
// as one, such as "a/b" and "ab" on PouchDB Server, which drops "/"; the
// source's databases could not be listed) or when ctx
// was cancelled (then it matches ctx.Err() and the Summary says which
// databases were interrupted; checkpoints are written, a rerun resumes).
// Otherwise per-database outcomes are in the Summary: Complete reports
// whether all are ok.
func Copy(ctx context.Context, src, dst *Endpoint, o CopyOptions) (*Summary, error) {
	if err := opened(src, dst); err != nil {
		return nil, err
	}
	if err := CheckDistinct(src, dst); err != nil {
		return nil, err
	}
	switch {
	case src.Kind() == KindArchive && dst.Kind() == KindArchive:
		return nil, optionErr("copy: %s to %s: to copy an archive into a new archive use backup (sofa backup %s %s)", src, dst, src, dst)
	case src.Kind() == KindArchive:
		return nil, optionErr("copy: %s is an archive: to copy it into a server use restore (sofa restore %s %s)", src, src, dst)
	case dst.Kind() == KindArchive:
		return nil, optionErr("copy: %s is an archive: to copy a server into an archive use backup (sofa backup %s %s)", dst, src, dst)
	case src.Kind() != KindServer || dst.Kind() != KindServer:
		return nil, optionErr("copy: %s to %s: both must be server URLs (one database: package replicate)", src, dst)
	}
	o, err := copyDefaults(o)
	if err != nil {
		return nil, err
	}
	var warnings []string
	for _, w := range []string{sameUUIDWarning(src, dst), replicasWarning(ctx, dst.couch.Server, o.N)} {
		if w != "" {
			o.logf("warning: %s", w)
			warnings = append(warnings, w)
		}
	}
	dbs, skipped, err := selectDBs(ctx, src, o.Selection, "source")
	if err != nil {
		return nil, err
	}
	ssrv, tsrv := src.couch.Server, dst.couch.Server
	if err := distinctTargets(tsrv, nil, "copied", dbs); err != nil {
		return nil, err
	}
	j := o.job(ssrv, tsrv, replicate.NewBudget(o.Engine.MaxInflightBytes), listTarget(ctx, tsrv, &o.RunControl))
	sum, runErr := o.runDBs(ctx, dbs, j.fleetJob(), NewStallWatch(src, dst).Waiting, true, src, dst)
	sum.RequestsByKind = map[string]map[string]int64{"source": ssrv.Stats.Kinds(), "target": tsrv.Stats.Kinds()}
	sum.Warnings = append(sum.Warnings, warnings...)
	sum.LeftOut = append(skipped, sum.LeftOut...)
	if runErr != nil {
		return &sum, fmt.Errorf("copy: %w", runErr)
	}
	return &sum, nil
}

// dbJob is the job of one database (fleet.Job).
type dbJob = fleet.Job

// job maps the options onto the per-database job between the servers
// ssrv and tsrv: each target database created with the source's
// properties (or an existing one accepted: empty, holding this copy's
// checkpoint or claim, _users, or ReuseExisting), `_revs_limit` set
// first and `_security` last, then checked (Verify). budget is shared by
// the databases in flight; onTarget (nil: unknown) holds the target's
// databases listed at the start.
func (o *CopyOptions) job(ssrv, tsrv *couch.Server, budget *replicate.Budget, onTarget *targetListing) *pairJob {
	engine := o.Engine
	engine.CopyMetadata = true
	return &pairJob{src: ssrv, tgt: tsrv, engine: engine, budget: budget, verify: o.Verify,
		q: o.Q, n: o.N, reuse: o.ReuseExisting, sourceReadOnly: !o.SourceCheckpoints, batchInfo: true, warnReplaced: true,
		lenientRevpos: tsrv.Vendor == couch.VendorPouchDB, onTarget: onTarget, rc: &o.RunControl,
		rules: func(t dbTask, r *targetRules) { r.Reuse = r.Reuse || t.Target == couch.UsersDB }}
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

// CheckDistinct refuses, with an *OptionError ("SOURCE and TARGET are
// the same server", "... database" or "... archive"), a source and a
// target that name the same CouchDB server (both server endpoints), the
// same database, or the same archive (both archives at one location of
// one kind of store; "-", stdin as a source and stdout as a target, is
// two): a copy onto itself. Copy, CopyDB, Sync, Backup and a restore
// into an archive check it first; a caller may check before it starts
// anything else.
func CheckDistinct(src, dst *Endpoint) error {
	if err := opened(src, dst); err != nil {
		return err
	}
	if src.Kind() == KindArchive && dst.Kind() == KindArchive {
		if src.archive != storage.Stdio && sameArchive(src, dst) {
			return optionErr("SOURCE and TARGET are the same archive (%s)", dst)
		}
		return nil
	}
	s, d := src.Couch(), dst.Couch()
	if s == nil || d == nil || s.Server.URL() != d.Server.URL() || s.DBName != d.DBName {
		return nil
	}
	what := "database"
	if s.DBName == "" {
		what = "server"
	}
	return optionErr("SOURCE and TARGET are the same %s", what)
}

// sameArchive reports whether archive endpoints a and b name one archive:
// the same kind of store and location (a local path made absolute; an
// s3:// URL names its object).
func sameArchive(a, b *Endpoint) bool {
	if fmt.Sprintf("%T", a.store) != fmt.Sprintf("%T", b.store) {
		return false
	}
	if _, local := a.store.(storage.Local); local {
		pa, err1 := filepath.Abs(a.archive)
		pb, err2 := filepath.Abs(b.archive)
		return err1 == nil && err2 == nil && pa == pb
	}
	return a.archive == b.archive // an s3:// URL names its object
}

// CopyDB copies one database to another (both database endpoints) with
// the engine, creating the target when asked. The Result holds the
// replication id, the seqs, the counters and each revision not copied.
func CopyDB(ctx context.Context, src, dst *Endpoint, o CopyDBOptions) (*replicate.Result, error) {
	if err := opened(src, dst); err != nil {
		return nil, err
	}
	if err := CheckDistinct(src, dst); err != nil {
		return nil, err
	}
	if src.Kind() != KindDatabase || dst.Kind() != KindDatabase {
		return nil, optionErr("copy: %s to %s: both must be database URLs", src, dst)
	}
	if err := o.Engine.Check(); err != nil {
		return nil, &OptionError{Err: err}
	}
	sdb := src.couch.Server.DB(src.couch.DBName)
	sinfo, err := sdb.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	// An existing target is written into; a missing one is created only
	// when asked, with the source's properties, and claimed before any
	// document: a rerun after an interruption knows the database is its
	// own and still owes it `_revs_limit` and `_security`.
	rules := targetRules{Props: couch.CreateOptions{Partitioned: sinfo.Partitioned}, Reuse: true, CheckClaim: o.CreateTarget}
	if !o.CreateTarget {
		rules.Missing = fmt.Errorf("target database %s does not exist (use --create-target)%.0w", dst.couch.Server.DB(dst.couch.DBName), ErrNoTarget)
	}
	pt, err := prepareTarget(ctx, dst.couch.Server, dst.couch.DBName, sinfo, rules)
	if err != nil {
		return nil, err
	}
	opts := o.Engine
	opts.CopyMetadata = o.CopySecurity || pt.Created || pt.Claimed
	opts.SourceReadOnly = !o.SourceCheckpoints
	opts.SourceInfo = &sinfo
	if ct, ok := pt.Target.(createdTarget); ok && pt.Created {
		opts.TargetCreated = ct.Created()
	}
	var warnings []string
	if w := sameUUIDWarning(src, dst); w != "" {
		warnings = append(warnings, w)
	}
	if ti := pt.InfoRead; ti != nil && ti.Partitioned != sinfo.Partitioned {
		warnings = append(warnings, partitionedWarning(sinfo.Partitioned))
	}
	for _, w := range warnings {
		if opts.Warn != nil {
			opts.Warn(w)
		}
	}
	res, err := replicate.Run(ctx, sdb, pt.Target, opts)
	if res != nil && len(warnings) > 0 {
		res.Warnings = append(warnings, res.Warnings...)
	}
	return res, err
}
