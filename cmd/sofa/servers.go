package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/limit"
	"github.com/sofadb/sofa/internal/progress"
	"github.com/sofadb/sofa/replicate"
)

// runServers replicates every selected database of a server (whole-server
// mode) under the adaptive concurrency controller.
func (rc *replicateCmd) runServers(ctx context.Context, src, tgt *couch.Endpoint, sl, tl *limit.Limiter) error {
	if err := validVerifyMode(rc.verifyMode); err != nil {
		return err
	}
	filter := fleet.Filter{Include: rc.include, Exclude: rc.exclude, Skip: withoutUsers(fleet.ReplicateSkip, rc.withUsers)}
	if err := filter.Validate(); err != nil {
		return usageErr("%v", err)
	}
	names, err := fleet.ListDBs(ctx, src.Server, 1000)
	if err != nil {
		return fatal(fmt.Errorf("source: list databases: %v", err))
	}
	dbs := filter.Apply(names)
	if len(dbs) == 0 {
		return fatal(fmt.Errorf("source: no database matches (of %d listed)", len(names)))
	}
	var logger *slog.Logger
	if rc.verbose || rc.debug {
		lvl := slog.LevelInfo
		if rc.debug {
			lvl = slog.LevelDebug
		}
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	}
	// The target's databases, listed once: a database it lacks is created
	// straight away, without asking for it first (one request less per
	// database on a first run). Without the list every one is asked for.
	var onTarget map[string]bool
	if tnames, err := fleet.ListDBs(ctx, tgt.Server, 1000); err == nil {
		onTarget = make(map[string]bool, len(tnames))
		for _, n := range tnames {
			onTarget[n] = true
		}
	} else {
		rc.logf("target: list databases: %v (asking for each database instead)", err)
	}
	// One memory budget for all databases in flight.
	rc.budget = replicate.NewBudget(rc.engine.maxInflight)
	rc.engine.setMemoryLimit(int64(rc.control.maxDBs) << 20)
	tracker := progress.NewTracker()
	tracker.SetTotal(len(dbs))
	var display *progress.Display
	if !rc.quiet && !rc.jsonOut {
		display = progress.Start(tracker, os.Stderr, slog.New(slog.NewTextHandler(os.Stderr, nil)), progress.Options{})
	}
	sum, runErr := fleet.Run(ctx, dbs, rc.dbJob(src.Server, tgt.Server, onTarget), fleet.Options{
		Limiters: []*limit.Limiter{sl, tl}, MaxDBs: rc.control.maxDBs, Fixed: rc.control.fixed,
		IdealDuration: rc.control.idealDuration, Progress: tracker, Logger: logger,
	})
	if display != nil {
		display.Stop()
	}
	sum.RequestsByKind = map[string]map[string]int64{"source": src.Server.Stats.Kinds(), "target": tgt.Server.Stats.Kinds()}
	if rc.jsonOut {
		printJSON(os.Stdout, sum)
	} else if !rc.quiet {
		printFleetSummary(os.Stderr, &sum)
	}
	switch {
	case sum.Interrupted || errors.Is(runErr, context.Canceled):
		return &exitError{code: exitInterrupted, err: errors.New("interrupted: checkpoints written; run the same command again to resume")}
	case runErr != nil:
		return fatal(runErr)
	case !sum.Complete():
		return &exitError{code: exitPartial, err: fmt.Errorf("%d of %d databases were not copied completely (listed above)", sum.DBsTotal-sum.DBsOK, sum.DBsTotal)}
	}
	return nil
}

func withoutUsers(skip []string, withUsers bool) []string {
	if !withUsers {
		return skip
	}
	var out []string
	for _, s := range skip {
		if s != "_users" {
			out = append(out, s)
		}
	}
	return out
}

// dbJob copies one database of a whole-server run: create the target with
// the source's properties (or accept an existing one that is empty, holds
// this job's checkpoint, or --reuse-existing), copy documents with
// `_revs_limit` set first and `_security` last, then check doc counts.
//
// onTarget, when not nil, holds the names the target listed at the start.
func (rc *replicateCmd) dbJob(src, tgt *couch.Server, onTarget map[string]bool) fleet.Job {
	return func(ctx context.Context, name string, p *progress.DB) (fleet.DBResult, error) {
		r := fleet.DBResult{Name: name}
		sdb, tdb := src.DB(name), tgt.DB(name)
		// Batched with the other jobs' (one _dbs_info where the server
		// has it).
		sinfo, err := sdb.InfoBatched(ctx)
		if err != nil {
			return r, fmt.Errorf("source: %w", err)
		}
		p.SetDocsTotal(sinfo.DocCount + sinfo.DelCount)
		if err := rc.prepareTarget(ctx, sdb, tdb, sinfo, onTarget != nil && !onTarget[name]); err != nil {
			return r, asInterrupted(ctx, err)
		}
		opts := rc.engine.options()
		opts.CopyMetadata = true
		opts.SourceReadOnly = rc.checkpoints == checkpointsTarget
		opts.SourceInfo = &sinfo
		if tdb.Fresh {
			opts.TargetCreated = tdb.Created()
		}
		opts.Budget = rc.budget
		if rc.debug {
			opts.Debug = func(format string, args ...any) { rc.logf(name+": "+format, args...) }
		}
		opts.Counters = &replicate.Counters{}
		var warnMu sync.Mutex
		opts.Warn = func(s string) {
			rc.logf("%s: %s", name, s)
			warnMu.Lock()
			r.Warnings = append(r.Warnings, s)
			warnMu.Unlock()
		}
		stop := feedProgress(opts.Counters, p)
		res, err := replicate.Run(ctx, sdb, tdb, opts)
		stop()
		fillResult(&r, res)
		if err != nil {
			return r, err
		}
		if len(res.Failures) == 0 {
			// The source's counts read before the copy still hold when
			// the copy reached the update_seq read with them.
			var srcCounts *replicate.DBInfo
			if len(res.EndSeq) > 0 && bytes.Equal(res.EndSeq, sinfo.UpdateSeq) {
				srcCounts = &sinfo
			}
			opts.Warn = func(s string) { rc.logf("%s: %s", name, s) } // r is the caller's now
			if err := rc.verifyCopy(ctx, sdb, tdb, opts, srcCounts, &r); err != nil {
				return r, err
			}
		}
		return r, nil
	}
}

// errNotEmpty marks a target database that holds other data. _users is
// exempt: every server has one (with its _design/_auth), and its documents
// merge by revision like any replication.
var errNotEmpty = errors.New("target database exists and is not empty (use --reuse-existing to write into it)")

// prepareTarget creates the target database or decides whether an
// existing one may be written into. absent says the target did not list
// it: it is then created without asking for it first.
func (rc *replicateCmd) prepareTarget(ctx context.Context, sdb, tdb *couch.DB, sinfo replicate.DBInfo, absent bool) error {
	create := func() (bool, error) {
		err := tdb.Server().CreateDB(ctx, tdb.Name(), couch.CreateOptions{Partitioned: sinfo.Partitioned, Q: rc.q, N: rc.n})
		if errors.Is(err, couch.ErrExists) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("target: %w", err)
		}
		tdb.Fresh = true
		return true, claimNew(ctx, sinfo, tdb)
	}
	if absent {
		if created, err := create(); created || err != nil {
			return err
		}
		// created meanwhile: judged as any existing database below
	}
	tinfo, err := tdb.Info(ctx)
	if errors.Is(err, replicate.ErrNotFound) {
		created, err := create()
		if created || err != nil {
			return err
		}
		return claimTarget(ctx, sinfo, tdb) // created meanwhile
	}
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	if rc.reuseExisting || tdb.Name() == "_users" {
		return nil
	}
	if tinfo.DocCount+tinfo.DelCount == 0 {
		return claimTarget(ctx, sinfo, tdb)
	}
	id := replicate.ReplicationID(sinfo.Identity, tinfo.Identity)
	if _, err := tdb.GetLocal(ctx, "_local/"+id); err == nil || claimed(ctx, sinfo, tdb) {
		return nil // our own earlier run: resume
	}
	return errNotEmpty
}

// verifyCounts is the cheap check after each database: the target holds
// at least the source's live and deleted documents (the source may have
// grown meanwhile, the target may have had more). srcCounts, when not
// nil, are the source's counts at the seq the copy reached; otherwise
// the source is asked.
func (rc *replicateCmd) verifyCounts(ctx context.Context, sdb, tdb *couch.DB, srcCounts *replicate.DBInfo) error {
	var s replicate.DBInfo
	if srcCounts != nil {
		s = *srcCounts
	} else {
		var err error
		if s, err = sdb.InfoBatched(ctx); err != nil {
			return fmt.Errorf("verify: source: %w", err)
		}
	}
	// Batched with the other databases' checks: one _dbs_info for many
	// where the server has it.
	t, err := tdb.InfoBatched(ctx)
	if err != nil {
		return fmt.Errorf("verify: target: %w", err)
	}
	if t.DocCount+t.DelCount < s.DocCount+s.DelCount {
		return fmt.Errorf("verify: target holds %d documents (%d deleted), source %d (%d deleted)", t.DocCount, t.DelCount, s.DocCount, s.DelCount)
	}
	return nil
}

// feedProgress copies engine counters into a progress bar every 250 ms.
func feedProgress(c *replicate.Counters, p *progress.DB) func() {
	done := make(chan struct{})
	var last replicate.Stats
	push := func() {
		s := c.Snapshot()
		p.AddDocsRead(s.DocsRead - last.DocsRead)
		p.AddDocsWritten(s.DocsWritten - last.DocsWritten)
		p.AddDocWriteFailures(s.DocWriteFailures - last.DocWriteFailures)
		p.AddBytes(s.Bytes - last.Bytes)
		last = s
	}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				push()
				return
			case <-t.C:
				push()
			}
		}
	}()
	return func() { close(done); <-finished }
}

func printFleetSummary(w *os.File, s *fleet.Summary) {
	fmt.Fprintf(w, "sofa: %d databases in %.1fs: %d ok, %d partial, %d failed, %d interrupted, %d not started; docs_read=%d docs_written=%d doc_write_failures=%d bytes=%d (%s)\n",
		s.DBsTotal, time.Duration(s.Duration).Seconds(), s.DBsOK, s.DBsPartial, s.DBsFailed, s.DBsInterrupted, s.DBsNotStarted,
		s.DocsRead, s.DocsWritten, s.DocWriteFailures, s.Bytes, humanBytes(s.Bytes))
	for _, d := range s.DBs {
		if d.Status == fleet.StatusOK && len(d.Warnings) == 0 {
			continue
		}
		fmt.Fprintf(w, "sofa: database %q: %s", d.Name, d.Status)
		if d.Status == fleet.StatusOK {
			fmt.Fprintf(w, " with warnings")
		}
		if d.Error != "" {
			fmt.Fprintf(w, ": %s", d.Error)
		}
		fmt.Fprintln(w)
		for _, f := range d.Failures {
			fmt.Fprintf(w, "sofa:   not copied: id=%q rev=%s: %s: %s\n", shorten(f.ID), f.Rev, f.Error, f.Reason)
		}
		for _, m := range d.Warnings {
			fmt.Fprintf(w, "sofa:   warning: %s\n", m)
		}
	}
}
