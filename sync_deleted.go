package sofa

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/dbcopy"
	"github.com/sofadb/sofa/metrics"
	"github.com/sofadb/sofa/replicate"
)

// mirrorRecreated, with DeleteMissing, handles a database this run copied
// (or was copying: a first copy may have written part of it) that the
// watch has seen deleted since, or whose checkpoint shows it deleted and
// created again since (startOver): when the source holds it again
// (created anew before the catch-up looked), the target's copy of the old
// one is deleted, so that the next copy makes the target hold the new
// database only (replication never deletes: the old documents would
// stay). It is reported (what happened on the source: what) as deleted
// (and, once copied, created). A source
// still without it is left to the copy, which reports the deletion. On
// failure the database stays marked as seen deleted, for the retry.
func (s *syncer) mirrorRecreated(ctx context.Context, name, what string) error {
	if s.sourceGone(ctx, name) {
		return nil
	}
	if err := s.tsrv.DeleteDB(ctx, name); err != nil && !errors.Is(err, replicate.ErrNotFound) {
		s.mu.Lock()
		s.dbLocked(name).gone = true
		s.mu.Unlock()
		return fmt.Errorf("target: delete the copy of the database deleted on the source: %w", err)
	}
	const detail = "deleted on the target too (the source holds a new database under the name: it is copied)"
	s.mu.Lock()
	d := s.dbLocked(name)
	d.synced, d.sess, d.deleted = false, nil, true
	s.sum.Deleted = append(s.sum.Deleted, name)
	s.sum.DeletedOnTarget = append(s.sum.DeletedOnTarget, name)
	s.mu.Unlock()
	s.reportDeleted(name, what, detail)
	return nil
}

// startOver, with DeleteMissing, handles a copy of name that found in the
// target's checkpoint that the source database was deleted and created
// again since it was written (cause matches replicate.ErrSourceRecreated:
// a recreation while no run went on, found by the catch-up at the start,
// or one the watch missed) as mirrorRecreated handles one the watch saw:
// the target's copy of the old database is deleted, then copy copies the
// new one afresh. Without it the engine warns and copies the new
// database next to the old one's documents (replication never deletes).
func (s *syncer) startOver(ctx context.Context, name string, cause error, copy func() (fleet.DBResult, error)) (fleet.DBResult, error) {
	what := "deleted and created again on the source since the last checkpoint"
	if why, ok := strings.CutPrefix(cause.Error(), replicate.ErrSourceRecreated.Error()); ok {
		what += why // " (its instance_start_time changed)"
	}
	if err := s.mirrorRecreated(ctx, name, what); err != nil {
		return fleet.DBResult{Name: name}, err
	}
	return copy()
}

// sourceGone asks the source whether name still exists.
func (s *syncer) sourceGone(ctx context.Context, name string) bool {
	_, err := s.ssrv.DB(name).Info(ctx)
	return errors.Is(err, replicate.ErrNotFound)
}

// deletedOnSource reports a database deleted on the source and, with
// DeleteMissing, deletes the target's copy.
//
// A database this run never copied (created and deleted on the source
// before a copy could read it, e.g. an event from before the run) that
// the target does not hold either is not reported: nothing of it was or
// is on the target.
func (s *syncer) deletedOnSource(ctx context.Context, name string) {
	s.mu.Lock()
	d := s.dbLocked(name)
	known := d.synced || d.sess != nil || s.inCatchUp(name)
	d.running, d.again, d.synced, d.noticed, d.againAt = false, false, false, time.Time{}, time.Time{}
	d.sess = nil // a database created again under the name is another one
	already := d.deleted
	d.deleted = true
	delete(s.sum.Failing, name)
	s.mu.Unlock()
	if already {
		return
	}
	if !known {
		if _, err := s.tsrv.DB(name).Info(ctx); errors.Is(err, replicate.ErrNotFound) {
			if s.o.Copy.DebugLogf != nil {
				s.o.Copy.DebugLogf("%s: created and deleted on the source before it was copied; not on the target", name)
			}
			return
		}
	}
	s.mu.Lock()
	s.sum.Deleted = append(s.sum.Deleted, name)
	s.mu.Unlock()
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
	s.o.Metrics.DB(name).SetState(metrics.StateDeleted)
	s.reportDeleted(name, "deleted on the source", detail)
}

// reportDeleted says that name was what (deleted on the source, ...) and
// what became of the target's copy (detail): a log line, a warning to the
// Logger, an EventDeleted.
func (s *syncer) reportDeleted(name, what, detail string) {
	s.o.Copy.logf("%s: %s; %s", name, what, detail)
	if s.o.Copy.Logger != nil {
		s.o.Copy.Logger.Warn("database "+what, "db", name, "target", detail)
	}
	s.event(SyncEvent{Kind: EventDeleted, DB: name, Detail: detail})
}

// goneWhileStopped handles, at the start, the target's databases that
// copies from this source made and that the source no longer holds
// (deleted while no run went on, which no watch saw): each database of
// the target listing (onTarget; none when it failed) that the selection
// keeps, absent from the source's (onSource), holding this source's
// checkpoint or claim (one `_local` GET, two for a claim), is reported as
// deleted on the source (deletedOnSource: kept on the target, or deleted
// there with DeleteMissing). A database of the target's own, or another
// source's copy, has neither and is left alone.
func (s *syncer) goneWhileStopped(ctx context.Context, onSource []string, onTarget *targetListing) {
	if onTarget == nil || onTarget.on == nil {
		return
	}
	src := make(map[string]bool, len(onSource))
	for _, n := range onSource {
		src[n] = true
	}
	var gone []string
	for name := range onTarget.on {
		if !src[name] && s.owns(name) {
			gone = append(gone, name)
		}
	}
	slices.Sort(gone)
	for _, name := range gone {
		if ctx.Err() != nil {
			return
		}
		if s.copiedHere(ctx, name) {
			s.deletedOnSource(ctx, name)
		}
	}
}

// copiedHere reports whether the target's database name holds the
// checkpoint or the claim of a copy from the source's database of that
// name.
func (s *syncer) copiedHere(ctx context.Context, name string) bool {
	sdb, tdb := s.ssrv.DB(name), s.tsrv.DB(name)
	if _, err := tdb.GetLocal(ctx, "_local/"+replicate.ReplicationID(sdb.Identity(), tdb.Identity())); err == nil {
		return true
	}
	return dbcopy.Claimed(ctx, replicate.DBInfo{Name: name, Identity: sdb.Identity()}, tdb)
}
