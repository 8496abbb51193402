package sofa

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sofadb/sofa/replicate"
)

// mirrorRecreated, with DeleteMissing, handles a database this run copied
// (or was copying: a first copy may have written part of it) that the
// watch has seen deleted since: when the source holds it again
// (created anew before the catch-up looked), the target's copy of the old
// one is deleted, so that the next copy makes the target hold the new
// database only (replication never deletes: the old documents would
// stay). It is reported as deleted (and, once copied, created). A source
// still without it is left to the copy, which reports the deletion. On
// failure the database stays marked as seen deleted, for the retry.
func (s *syncer) mirrorRecreated(ctx context.Context, name string) error {
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
	s.reportDeleted(name, "deleted and created again on the source", detail)
	return nil
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
