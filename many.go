package sofa

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/dbcopy"
	"github.com/sofadb/sofa/replicate"
)

// The many-database code shared by Copy, Sync, Backup and Restore: the
// run control of their options, the preparation of each target database
// (prepareTarget), and the run of one job per database under the
// scheduler (fleet.Run), whose statuses fleet.Decide sets. The job itself
// is in dbjob.go, its check in dbcheck.go.

// RunControl are the options of a many-database run: how many databases
// at once, and what is told of it. Embedded in CopyOptions, BackupOptions
// and RestoreOptions.
type RunControl struct {
	// MaxDBs caps databases in flight (zero: DefaultMaxDBs); Fixed runs
	// MaxDBs at once whatever the limiters say; IdealDuration spreads the
	// starts over that time (zero: as fast as the limiters allow).
	MaxDBs        int
	Fixed         bool
	IdealDuration time.Duration
	// Progress receives the run's progress; nil: NoProgress.
	Progress Progress
	// Logger receives one record per database as it ends, at level Debug
	// for a database copied whole and Warn otherwise (a handler at the
	// default Info level shows the others only), and the controller's
	// decisions; nil: none.
	Logger *slog.Logger
	// Logf receives retries, warnings and decisions worth a line; nil:
	// none. DebugLogf also every batch and checkpoint; nil: none.
	Logf      func(format string, args ...any)
	DebugLogf func(format string, args ...any)
}

func (o *RunControl) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

func (o *RunControl) progress() Progress {
	if o.Progress == nil {
		return NoProgress
	}
	return o.Progress
}

// runDBs runs job once per database of dbs under the scheduler and the
// limiters of eps, telling o's Progress (started with waiting). stopWhenLost
// is fleet.Options.StopWhenLost: a copy or restore into a server stops once
// a server is lost (exit code 1), where a backup keeps the databases it
// read in its archive, each failed one marked.
func (o *RunControl) runDBs(ctx context.Context, dbs []string, job dbJob, waiting func(bool) string, stopWhenLost bool, eps ...*Endpoint) (fleet.Summary, error) {
	p := o.progress()
	p.Start(len(dbs), waiting)
	return fleet.Run(ctx, dbs, job, fleet.Options{
		Limiters: limiters(eps...), MaxDBs: o.MaxDBs, Fixed: o.Fixed,
		IdealDuration: o.IdealDuration, Progress: p, Logger: o.Logger, StopWhenLost: stopWhenLost,
	})
}

// targetRules say how prepareTarget treats the target database.
type targetRules struct {
	// Props are the properties of a database it creates.
	Props replicate.CreateOptions
	// Absent: the target's listing lacked the database, which is then
	// created without being asked for first (one request less each).
	Absent bool
	// CreateFirst: the target's listing is not in yet (targetListing),
	// so the database is created without being asked for first, as if
	// Absent; one that exists answers 412, and a create refused for
	// another reason (CouchDB answers 401 to a user who is not a server
	// admin whether or not the database exists) is then asked for, as
	// without a listing.
	CreateFirst bool
	// Reuse writes into an existing database whatever it holds
	// (ReuseExisting, _users, a restore's incremental or system database).
	Reuse bool
	// NotEmptyHint is what the refusal of an existing database that is
	// not empty offers instead ("": use --reuse-existing).
	NotEmptyHint string
	// Replace, when set, deletes an existing database and creates it
	// again before anything is written (restore --replace).
	Replace func(ctx context.Context) error
	// Missing, when set, is the error of a database that does not exist:
	// it is not created (one database copied without --create-target).
	Missing error
	// CheckClaim, with Reuse, asks an existing database whether this copy
	// claimed it (preparedTarget.Claimed).
	CheckClaim bool
	// Source, when it answers `_revs_diff` (dbcopy.RevsDiffer), is the
	// source database, and lets prepareTarget spare the claim of a small
	// copy: one of at most OneWrite documents (doc_count +
	// doc_del_count) gets none (preparedTarget.Unclaimed: the engine
	// marks the database with its first write instead), and an existing
	// target of at most RecogniseMax documents that holds neither
	// checkpoint nor claim is written into when it holds only revisions
	// of the source (dbcopy.Recognise: an earlier run stopped before its
	// mark was stored). Zero OneWrite: every database is claimed.
	Source                 replicate.Source
	OneWrite, RecogniseMax int64
}

// preparedTarget is a target database ready to be written.
type preparedTarget struct {
	replicate.Target
	// Created: this run created it (still empty).
	Created bool
	// Reused: it held documents before.
	Reused bool
	// Claimed: it holds this copy's claim from an earlier run (found with
	// CheckClaim, or when a run resumes), or this copy's revisions only
	// (recognised), or another run of this copy created it meanwhile:
	// what a created database is owed (properties, `_security`) may
	// still be owed.
	Claimed bool
	// Unclaimed: a small copy into a database of its own that holds no
	// claim (targetRules.OneWrite): the engine marks it
	// (replicate.Options.Unclaimed).
	Unclaimed bool
	// InfoRead is the target's info as prepareTarget read it (nil: not
	// read, a database it created); Checkpoint the replication's
	// checkpoint it found there (nil: none read).
	InfoRead   *replicate.DBInfo
	Checkpoint *replicate.LocalDoc
}

// prepareTarget creates the target database name with the rules' Props,
// or decides whether an existing one may be written into: empty, Reuse,
// or holding this copy's checkpoint or claim (an earlier run of it, which
// resumes). On a target that keeps `_local` documents
// (ServerCaps.Checkpoints) a database is claimed before any document is
// written: a rerun tells its own half-written database from someone
// else's even when no checkpoint was written (design documents are held
// back, and the checkpoints with them), except a small copy that the
// engine marks itself (targetRules.OneWrite). sinfo is the source
// database's.
func prepareTarget(ctx context.Context, ts replicate.TargetServer, name string, sinfo replicate.DBInfo, rules targetRules) (preparedTarget, error) {
	claims := ts.ServerCaps().Checkpoints
	differ, _ := rules.Source.(dbcopy.RevsDiffer)
	small := claims && differ != nil && rules.OneWrite > 0 && sinfo.DocCount+sinfo.DelCount <= rules.OneWrite
	open := func(created bool) (preparedTarget, error) {
		t, err := ts.OpenTarget(ctx, name, created)
		if err != nil {
			return preparedTarget{}, err // an archive's: it says so
		}
		return preparedTarget{Target: t, Created: created}, nil
	}
	claim := func(p preparedTarget, fresh bool) (preparedTarget, error) {
		if !claims {
			return p, nil
		}
		l, ok := p.Target.(dbcopy.Local)
		if !ok {
			return p, nil
		}
		if small {
			p.Unclaimed = true
			return p, nil
		}
		if fresh {
			return p, dbcopy.ClaimNew(ctx, sinfo, l)
		}
		return p, dbcopy.ClaimTarget(ctx, sinfo, l)
	}
	// create reports whether it created the database (false: it exists).
	create := func() (bool, error) {
		err := ts.CreateDB(ctx, name, rules.Props)
		if errors.Is(err, replicate.ErrExists) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("target: %w", err)
		}
		return true, nil
	}
	if rules.Absent || rules.CreateFirst && rules.Missing == nil {
		created, err := create()
		if err != nil && rules.Absent {
			return preparedTarget{}, err
		}
		if err == nil && created {
			p, err := open(true)
			if err != nil {
				return p, err
			}
			return claim(p, true)
		}
		// created meanwhile (or a create first refused): judged as any
		// existing database below
	}
	p, err := open(false)
	if err != nil {
		return p, err
	}
	tinfo, err := targetInfo(ctx, p.Target)
	if err == nil && rules.Replace != nil {
		if err := rules.Replace(ctx); err != nil {
			return p, err
		}
		return claim(p, true)
	}
	if errors.Is(err, replicate.ErrNotFound) {
		if rules.Missing != nil {
			return p, rules.Missing
		}
		created, err := create()
		if err != nil {
			return p, err
		}
		if !created {
			p.Claimed = claims // created meanwhile: claimed now
			return claim(p, false)
		}
		if p, err = open(true); err != nil {
			return p, err
		}
		return claim(p, true)
	}
	if err != nil {
		return p, fmt.Errorf("target: %w", err)
	}
	p.InfoRead = &tinfo
	p.Reused = tinfo.DocCount+tinfo.DelCount > 0
	if rules.Reuse {
		if l, ok := p.Target.(dbcopy.Local); ok && claims && rules.CheckClaim {
			p.Claimed = dbcopy.Claimed(ctx, sinfo, l)
		}
		return p, nil
	}
	if !p.Reused {
		return claim(p, false)
	}
	if claims {
		id := replicate.ReplicationID(sinfo.Identity, tinfo.Identity)
		if b, err := p.GetLocal(ctx, "_local/"+id); err == nil {
			p.Checkpoint = &replicate.LocalDoc{ID: id, Body: b}
			p.Unclaimed = small
			return p, nil // our own earlier run (or its mark): resume
		}
		if l, ok := p.Target.(dbcopy.Local); ok && dbcopy.Claimed(ctx, sinfo, l) {
			p.Claimed = true
			return p, nil
		}
		// An earlier run of a small copy, stopped before the engine's
		// mark was stored, left at most one write's revisions.
		tdb, ok := p.Target.(replicate.Source)
		if ok && differ != nil && rules.RecogniseMax > 0 && tinfo.DocCount+tinfo.DelCount <= rules.RecogniseMax {
			own, err := dbcopy.Recognise(ctx, tdb, differ, rules.RecogniseMax)
			if err != nil {
				return p, err
			}
			if own {
				p.Claimed = true
				return claim(p, false)
			}
		}
	}
	hint := rules.NotEmptyHint
	if hint == "" {
		hint = "use --reuse-existing to write into it"
	}
	return p, fmt.Errorf("%w (%s)", dbcopy.ErrNotEmpty, hint)
}

// targetInfo reads the target database's info, batched with other
// databases' where the server can (`_dbs_info`).
func targetInfo(ctx context.Context, t replicate.Target) (replicate.DBInfo, error) {
	if b, ok := t.(batchedInfo); ok {
		return b.InfoBatched(ctx)
	}
	return t.Info(ctx)
}
