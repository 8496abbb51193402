package sofa

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/dbcopy"
	"github.com/sofadb/sofa/replicate"
)

// The one per-database job of the many-database operations. Copy (and
// Sync's first copy of each database), Backup and Restore each map their
// options onto a pairJob; its run copies one database between two
// endpoints seen only through the contracts (replicate.SourceServer,
// TargetServer and their ServerCaps): it opens the source database,
// prepares the target (prepareTarget), copies with replicate.Run, checks
// the copy as far as the pair allows (check) and fills the DBResult, whose
// status fleet.Decide sets.

// pairJob is the copy of each database from one server to another.
type pairJob struct {
	// src is the source server (a task may name its own: the archives of
	// a restore chain); tgt the target server.
	src replicate.SourceServer
	tgt replicate.TargetServer
	// engine are the verb's engine options; run sets the per-database
	// ones (counters, budget, warnings, source info, created target).
	engine replicate.Options
	budget *replicate.Budget
	// verify is how each copy is checked (see check).
	verify VerifyMode
	// q and n are the shards and replicas of created databases (zero:
	// the target's default).
	q, n int
	// reuse writes into existing non-empty target databases.
	reuse bool
	// sourceReadOnly: nothing is written to the source (no checkpoint).
	sourceReadOnly bool
	// batchInfo reads each source database's info batched with the
	// other databases' where the source can (couch.DB.InfoBatched: one
	// `_dbs_info` for many).
	batchInfo bool
	// warnLogOnly: the engine's warnings go to the log, not into
	// DBResult.Warnings (a backup's results have never listed them),
	// but for one that it read the database from the beginning
	// (replicate.StartOverNote: an incremental backed up in full).
	warnLogOnly bool
	// lenientRevpos compares attachments without their revpos (a PouchDB
	// Server target rewrites it) and numbers as doubles (it holds no
	// other).
	lenientRevpos bool
	// retryRefused copies a database once more when a validate_doc_update
	// refused some of its revisions (a restore: the design documents
	// written at the end of one archive of a chain may accept what an
	// earlier archive's refused; see retryRefusedOnce).
	retryRefused bool
	// onTarget, when not nil, is the target's databases listed at the
	// start: one it lacks is created without being asked for first.
	onTarget *targetListing
	// rules, if set, adjusts the target rules of each database.
	rules func(t dbTask, r *targetRules)
	// hooks, if set, wrap each copy (Restore's: restoreHooks).
	hooks dbHooks
	// warnReplaced warns when a copy into a database that held documents
	// before, and that it did not create or claim, replaced its
	// `_security` or lowered its `_revs_limit` (see metaBefore).
	warnReplaced bool
	// observer, if set, gives each database's replicate.Observer (Sync's
	// metrics).
	observer func(db string) replicate.Observer
	// keep, if set, receives the replication of each database copied
	// with no error, kept open for later passes (Sync): the database is
	// copied by a replicate.Session's first pass and its checkpoint
	// (the same requests as replicate.Run) instead of replicate.Run.
	keep func(db string, s *replicate.Session)
	rc   *RunControl
}

// dbTask is one database of a pairJob.
type dbTask struct {
	// Source and Target are the database's names on each side.
	Source, Target string
	// From, if set, is the source server of this database instead of
	// the job's (one archive of a chain).
	From replicate.SourceServer
	// Opened, if set, is the source, already opened by the caller (a
	// database of an archive read in order): it is read once.
	Opened replicate.Source
	// Incremental: the source holds only the database's changes after
	// an earlier archive of the chain.
	Incremental bool
	// Later: a later archive of the chain holds this database too (its
	// step follows, with the same Chain if set): a group whose backup
	// failed part way is then no failure, as the later group continues
	// from the checkpoint it reached.
	Later bool
	// Chain, if set, is shared by the steps of one database through a
	// chain of archives (a restore's winner log, see restoreHooks).
	Chain *chainSteps
}

// dbCopy is one database's copy in progress.
type dbCopy struct {
	task  dbTask
	sinfo replicate.DBInfo // the source's, read before the copy
	// smeta is the source's `_security`, `_revs_limit` and properties,
	// read before the target is prepared (nil: not copied).
	smeta  *replicate.Metadata
	target preparedTarget
	r      *fleet.DBResult
	p      DBProgress   // the run's progress of this database
	warn   func(string) // the engine's warnings
	// sess is the replication of the first copy, kept open (pairJob.keep).
	sess *replicate.Session
}

// dbHooks are what a verb adds around the copy of each database.
type dbHooks interface {
	// pair returns the source and target the engine copies between
	// (again: the second copy after a check found differences), end, run
	// once the engine returned without error (nil: nothing), and done,
	// which releases what pair holds.
	pair(ctx context.Context, c *dbCopy, src replicate.Source, again bool) (s replicate.Source, t replicate.Target, end func(context.Context) error, done func(), err error)
	// failed returns err of a copy that failed, said as the verb says it.
	failed(c *dbCopy, err error) error
}

// fleetJob is the job of each database named alike on both sides.
func (j *pairJob) fleetJob() dbJob {
	return func(ctx context.Context, name string, p DBProgress) (fleet.DBResult, error) {
		return j.run(ctx, dbTask{Source: name, Target: name}, p)
	}
}

// run copies one database (see pairJob) and reports it to p.
func (j *pairJob) run(ctx context.Context, t dbTask, p DBProgress) (r fleet.DBResult, err error) {
	r = fleet.DBResult{Name: t.Target}
	src, release, err := j.openSource(ctx, t)
	if err != nil {
		return r, err
	}
	defer release()
	defer func() { err = goneFromSource(ctx, src, err, r.DocsWritten, false) }()
	c := &dbCopy{task: t, r: &r, p: p}
	if c.sinfo, err = j.sourceInfo(ctx, src); err != nil {
		return r, fmt.Errorf("source: %w", err)
	}
	p.SetDocsTotal(c.sinfo.DocCount + c.sinfo.DelCount)
	if j.engine.CopyMetadata && j.hooks == nil {
		// before the target is created: a source the account may not
		// read whole leaves no empty database behind on the target (a
		// pair's hooks may give the engine another source: not here)
		meta, err := src.Metadata(ctx)
		if err != nil {
			return r, fmt.Errorf("source: %w", err)
		}
		c.smeta = &meta
	}
	absent, pending := j.onTarget.lookup(t.Target)
	rules := targetRules{
		Props:  replicate.CreateOptions{Partitioned: c.sinfo.Partitioned, Q: j.q, N: j.n},
		Absent: absent, CreateFirst: pending,
		Reuse:  j.reuse,
		Source: src, OneWrite: dbcopy.OneWrite(j.engine), RecogniseMax: dbcopy.RecogniseMax(j.engine),
	}
	if j.rules != nil {
		j.rules(t, &rules)
	}
	if c.target, err = prepareTarget(ctx, j.tgt, t.Target, c.sinfo, rules); err != nil {
		return r, dbcopy.AsInterrupted(ctx, err)
	}
	if j.hooks != nil {
		defer func() {
			if err != nil {
				err = j.hooks.failed(c, err)
			}
		}()
	}
	if s, ok := c.target.Target.(sourceInfoSetter); ok {
		s.SetSourceInfo(c.sinfo)
	}
	inFull := ""
	if f, ok := c.target.Target.(interface{ InFull() string }); ok {
		inFull = f.InFull()
	}
	var warnMu sync.Mutex
	c.warn = func(s string) {
		// once per database: a second copy of it (a retry) says again
		// what the first said
		warnMu.Lock()
		said := slices.Contains(r.Warnings, s)
		// a backup that could not continue the previous archive says so
		if !said && (!j.warnLogOnly || strings.Contains(s, replicate.StartOverNote)) {
			r.Warnings = append(r.Warnings, s)
		}
		warnMu.Unlock()
		if !said {
			j.rc.logf("%s: %s", t.Target, s)
		}
	}
	if inFull != "" {
		c.warn("backed up in full, not as its changes since the previous archive: " + inFull + "; " + replicate.StartOverNote)
	}
	if ti := c.target.InfoRead; ti != nil && ti.Partitioned != c.sinfo.Partitioned {
		c.warn(partitionedWarning(c.sinfo.Partitioned))
	}
	if ts, ok := j.tgt.(*couch.Server); ok && ts.Vendor == couch.VendorPouchDB {
		// PouchDB Server takes both silently (found by a tester)
		if c.target.Created && c.sinfo.Partitioned {
			c.warn("the source database is partitioned; PouchDB Server has no partitioned databases: its documents are copied, the property is not")
		}
		if st := ts.StoredAs(t.Target); st != t.Target {
			c.warn(fmt.Sprintf("PouchDB Server keeps it as %q (it drops \"/\" from database names)", st))
		}
	}
	opts := j.options(c)
	var before *replicate.Metadata
	if j.warnReplaced && opts.CopyMetadata {
		before = metaBefore(ctx, c)
	}
	stop := dbcopy.FeedProgress(opts.Counters, p)
	err = j.copyOnce(ctx, c, src, opts, false)
	stop()
	if err == nil && j.retryRefused && countRefused(r.Failures) > 0 {
		err = j.retryRefusedOnce(ctx, c, src, opts)
	}
	if err == nil {
		warnUserConflicts(ctx, c)
		if before != nil {
			warnMetaReplaced(ctx, c, *before)
		} else if j.warnReplaced && opts.CopyMetadata {
			warnRerunReplaced(ctx, c)
		}
	}
	if err == nil && len(r.Failures) == 0 {
		// The check's own copy warns to the log only.
		opts.Warn = func(s string) { j.rc.logf("%s: %s", t.Target, s) }
		err = j.check(ctx, c, src, opts)
	}
	// an archive group of a database deleted meanwhile says so
	_, toArchive := c.target.Target.(groupTarget)
	err = endTarget(c.target.Target, &r, goneFromSource(ctx, src, err, r.DocsWritten, toArchive))
	if err == nil && c.sess != nil {
		j.keep(t.Target, c.sess)
	}
	return r, err
}

// openSource opens the task's source database; release closes what it
// opened.
func (j *pairJob) openSource(ctx context.Context, t dbTask) (replicate.Source, func(), error) {
	if t.Opened != nil {
		return t.Opened, func() {}, nil
	}
	ss := t.From
	if ss == nil {
		ss = j.src
	}
	s, err := ss.OpenSource(ctx, t.Source, j.sourceReadOnly)
	if err != nil {
		return nil, nil, err
	}
	return s, func() { closeSource(s) }, nil
}

// sourceServer is the task's source server (nil: its source was opened
// by the caller, and can be read once).
func (j *pairJob) sourceServer(t dbTask) replicate.SourceServer {
	switch {
	case t.Opened != nil:
		return nil
	case t.From != nil:
		return t.From
	}
	return j.src
}

func closeSource(s replicate.Source) {
	if c, ok := s.(interface{ Close() error }); ok {
		c.Close()
	}
}

// batchedInfo is a database whose info can be read batched with other
// databases' (couch.DB: `_dbs_info`).
type batchedInfo interface {
	InfoBatched(ctx context.Context) (replicate.DBInfo, error)
}

// sourceInfo reads the source database's info (counts, identity,
// properties).
func (j *pairJob) sourceInfo(ctx context.Context, src replicate.Source) (replicate.DBInfo, error) {
	if b, ok := src.(batchedInfo); ok && j.batchInfo {
		return b.InfoBatched(ctx)
	}
	return src.Info(ctx)
}

// sourceInfoSetter is a target that records the source's state (an
// archive group: archive.DBWriter.SetSourceInfo).
type sourceInfoSetter interface {
	SetSourceInfo(replicate.DBInfo)
}

// createdTarget describes a database this client has just created
// (couch.DB.Created): the engine then reads neither its info nor its
// checkpoints.
type createdTarget interface {
	Created() *replicate.DBInfo
}

// options are the engine's options for the copy c.
func (j *pairJob) options(c *dbCopy) replicate.Options {
	opts := j.engine
	opts.SourceReadOnly = j.sourceReadOnly
	opts.SourceInfo, opts.SourceMetadata = &c.sinfo, c.smeta
	if ct, ok := c.target.Target.(createdTarget); ok && c.target.Created {
		opts.TargetCreated = ct.Created()
	}
	opts.TargetInfo, opts.TargetCheckpoint = c.target.InfoRead, c.target.Checkpoint
	opts.Unclaimed = c.target.Unclaimed
	opts.Budget = j.budget
	opts.Counters = &replicate.Counters{}
	if j.observer != nil {
		opts.Observer = j.observer(c.task.Target)
	}
	if j.rc.DebugLogf != nil {
		name := c.task.Target
		opts.Debug = func(format string, args ...any) { j.rc.DebugLogf(name+": "+format, args...) }
	}
	opts.Warn = c.warn
	return opts
}

// copyOnce runs the engine from src into the prepared target (through
// the hooks' pair) and adds its counters and failures to c.r.
func (j *pairJob) copyOnce(ctx context.Context, c *dbCopy, src replicate.Source, opts replicate.Options, again bool) error {
	s, t := src, c.target.Target
	var end func(context.Context) error
	if j.hooks != nil {
		var done func()
		var err error
		if s, t, end, done, err = j.hooks.pair(ctx, c, src, again); err != nil {
			return err
		}
		defer done()
	}
	res, err := j.replicate(ctx, c, s, t, opts, again)
	dbcopy.FillResult(c.r, res)
	if err != nil {
		return err
	}
	if end != nil {
		return end(ctx)
	}
	return nil
}

// replicate copies s to t: replicate.Run, or, for the first copy of a
// job that keeps its replications (keep), a Session's first pass and its
// checkpoint (the same requests), the Session held in c.sess.
func (j *pairJob) replicate(ctx context.Context, c *dbCopy, s replicate.Source, t replicate.Target, opts replicate.Options, again bool) (*replicate.Result, error) {
	if j.keep == nil || again {
		return replicate.Run(ctx, s, t, opts)
	}
	sess, err := replicate.Open(ctx, s, t, opts)
	if err != nil {
		return nil, err
	}
	res, err := sess.Pass(ctx)
	if err != nil {
		return res, err // an interrupted pass wrote its checkpoint
	}
	if err := sess.Checkpoint(ctx); err != nil {
		return res, err
	}
	res.EndSeq = sess.Seq()
	c.sess = sess
	return res, nil
}

// groupTarget is a target that is ended once written: an archive group
// (archive.DBWriter), which Abort marks as not whole.
type groupTarget interface {
	Close() error
	Abort(reason string) error
}

// endTarget ends a group target: Close after a whole copy, Abort after a
// failed one (err) or one that left revisions out (r.Failures), so that
// the archive never presents the database as whole. It returns err, or
// the group's own error.
func endTarget(t replicate.Target, r *fleet.DBResult, err error) error {
	g, ok := t.(groupTarget)
	switch {
	case !ok:
		return err
	case err != nil:
		g.Abort(err.Error())
		return err
	case len(r.Failures) > 0:
		return g.Abort(notWhole(r.Failures))
	}
	return g.Close()
}

// notWhole says why a group is not whole: the check's verdict, or the
// revisions left out.
func notWhole(fails []replicate.DocError) string {
	f := fails[0]
	if f.ID == "" {
		return f.Reason
	}
	return fmt.Sprintf("%d revisions not backed up (first: id %q rev %s: %s: %s)", len(fails), f.ID, f.Rev, f.Error, f.Reason)
}

// partitionedWarning is the warning of a copy into an existing database
// whose partitioned property differs from the source's (srcPartitioned):
// a copy writes documents, not that property.
func partitionedWarning(srcPartitioned bool) string {
	if srcPartitioned {
		return "the source database is partitioned and the existing target is not: its documents are copied, the property is not (delete the target to have it created partitioned)"
	}
	return "the existing target database is partitioned and the source is not: it refuses documents whose ids have no partition prefix"
}

// errStoredIncomplete marks the failure of a database deleted at the
// source while a backup read it (see goneFromSource).
var errStoredIncomplete = errors.New("stored incomplete")

// goneFromSource turns err, a job's failure that says something is not
// found, into a *fleet.LeftOutError when the source database itself no
// longer exists (asked again): a database deleted at the source during a
// many-database run is left out of it, not failed (with thousands of
// tenants, a nightly run always met some). written is what the target
// got before: a partial copy, which the reason names.
//
// Into an archive (toArchive: its group begun), the database is not
// left out: the archive holds what was read of it, marked incomplete
// (as sofa verify of the archive says), so it fails the backup's
// database (errStoredIncomplete), which a backup reports as not backed up
// completely.
func goneFromSource(ctx context.Context, src replicate.Source, err error, written int64, toArchive bool) error {
	var lo *fleet.LeftOutError
	if err == nil || ctx.Err() != nil || !errors.Is(err, replicate.ErrNotFound) || errors.As(err, &lo) || errors.Is(err, errStoredIncomplete) {
		return err
	}
	if _, ierr := src.Info(ctx); !errors.Is(ierr, replicate.ErrNotFound) {
		return err
	}
	if toArchive {
		return fmt.Errorf("deleted at the source during the backup: the archive holds the %d revisions read before, marked incomplete%.0w: %w", written, errStoredIncomplete, err)
	}
	reason := "deleted at the source during the run"
	if written > 0 {
		reason += fmt.Sprintf("; the %d revisions written before stay on the target, a partial copy", written)
	}
	return &fleet.LeftOutError{Reason: reason, Err: err}
}
