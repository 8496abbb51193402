package sofa

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sofadb/sofa/replicate"
)

// Checkpoint writes in flight at once: the timer's one at a time, so
// that checkpoints never crowd out the wakes (a database written once per
// interval costs one checkpoint per wake: with one in flight they take
// at most one of the target's limiter slots, and wait when the target is
// busy); at the end of a run a few, through the target's limiter.
const (
	timerCheckpointsAtOnce = 1
	finalCheckpointsAtOnce = 8
)

// checkpointInterval is the time between two checkpoints of one
// database: the engine's CheckpointInterval.
func (s *syncer) checkpointInterval() time.Duration {
	if d := s.o.Copy.Engine.CheckpointInterval; d > 0 {
		return d
	}
	return replicate.DefaultCheckpointInterval
}

// checkpointLoop writes, every quarter interval until ctx ends, the
// checkpoint of each database whose Session got further than its last
// checkpoint at least an interval ago: a wake writes none (it would cost
// as much as the wake), so a database written once an hour is
// checkpointed once, an interval after its wake.
func (s *syncer) checkpointLoop(ctx context.Context) {
	every := s.checkpointInterval()
	everyTick(ctx, max(every/4, 10*time.Millisecond), func() {
		s.checkpointDue(ctx, time.Now().Add(-every), timerCheckpointsAtOnce, false)
	})
}

// checkpointDue checkpoints the dirty Sessions last checkpointed before
// cutoff (all dirty ones with a zero cutoff), atOnce at a time, and
// returns how many it wrote of how many were dirty. A failed checkpoint is logged and tried
// again at the next tick, but for one refused for lack of rights
// (replicate.ErrDenied), after which none is tried: it stops the run
// (refused), unless final (the run's end, whatever ended it).
func (s *syncer) checkpointDue(ctx context.Context, cutoff time.Time, atOnce int, final bool) (written, dirty int) {
	type due struct {
		name string
		sess *replicate.Session
	}
	var list []due
	s.mu.Lock()
	for n, d := range s.dbs {
		if d.sess != nil && d.sess.Dirty() && (cutoff.IsZero() || d.sess.CheckpointedAt().Before(cutoff)) {
			list = append(list, due{n, d.sess})
		}
	}
	s.mu.Unlock()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	sem := make(chan struct{}, atOnce)
	var wg sync.WaitGroup
	var done atomic.Int64
	for _, d := range list {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := d.sess.Checkpoint(ctx); err != nil {
				if ctx.Err() == nil && errors.Is(err, replicate.ErrDenied) {
					// each further one would be one more failed login
					stop()
					if !final {
						s.refused(d.name, err)
					}
					return
				}
				if ctx.Err() == nil {
					s.o.Copy.logf("%s: checkpoint failed: %v; trying again in %s", d.name, err, s.checkpointInterval())
				}
				return
			}
			done.Add(1)
		})
	}
	wg.Wait()
	return int(done.Load()), len(list)
}

// checkpointAll writes the checkpoint of every dirty Session at the end
// of a run (ctx cancelled: a context of its own, 30 s at most).
func (s *syncer) checkpointAll(ctx context.Context) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	atOnce := finalCheckpointsAtOnce
	if s.deniedErr() != nil {
		atOnce = 1 // a server that refused: one failed login at most
	}
	n, due := s.checkpointDue(fctx, time.Time{}, atOnce, true)
	if n > 0 {
		s.o.Copy.logf("final checkpoints of %d %s written", n, plural(int64(n), "database"))
	}
	if n < due {
		s.o.Copy.logf("final checkpoints of %d %s not written (the target did not take them): a restart resumes them from their last checkpoint", due-n, plural(int64(due-n), "database"))
		s.mu.Lock()
		s.sum.FinalCheckpointsLost = due - n
		s.mu.Unlock()
	}
}
