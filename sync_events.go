package sofa

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/replicate"
)

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
	// EventTargetLost and EventTargetBack: the target server stopped
	// answering (Err: the first failure; its requests are retried), or
	// answers again; once per outage, whatever the number of requests
	// retried. Detail is the line logged ("target lost: ...", "target
	// back after 6.2s (14 failed attempts)").
	EventTargetLost SyncEventKind = "target_lost"
	EventTargetBack SyncEventKind = "target_back"
	// EventPolled: a listing of the source ended (poll mode; Detail: the
	// number of databases seen).
	EventPolled SyncEventKind = "polled"
	// EventSecurity: DB's `_security` changed at the source and was
	// written to the target (Detail: the new `_security`), or that write
	// failed (Err).
	EventSecurity SyncEventKind = "security"
	// EventRevsLimit: DB's `_revs_limit` changed at the source and was
	// written to the target (Detail: the new limit), or that write
	// failed (Err).
	EventRevsLimit SyncEventKind = "revs_limit"
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
	// those that failed (each retried), not counting a catch-up that
	// found its database deleted on the source (listed in Deleted). The
	// initial copy's failures are CatchUp's (DBsFailed), in neither.
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
	// SecurityUpdates counts the `_security` changes at the source
	// written to the target while following (SecurityInterval).
	SecurityUpdates int64 `json:"security_updates"`
	// RevsLimitUpdates counts the `_revs_limit` changes at the source
	// written to the target while following (SecurityInterval).
	RevsLimitUpdates int64 `json:"revs_limit_updates"`
	// Reconnects counts failures of the server's watch.
	Reconnects int64          `json:"reconnects"`
	Duration   fleet.Duration `json:"duration_s"`
	// Interrupted: the run ended on ctx (always, unless it failed to
	// start).
	Interrupted bool `json:"interrupted"`
	// FinalCheckpointsLost counts the databases whose final checkpoint
	// could not be written when the run ended (the target did not
	// answer within 30 s): a restart resumes them from their last one.
	FinalCheckpointsLost int `json:"final_checkpoints_lost,omitempty"`
}

func (s *syncer) event(e SyncEvent) {
	if s.o.Event != nil {
		s.o.Event(e)
	}
}

// targetReach reports an edge of the target server's reachability
// (couch.Client.WatchReach): a line, a warning to the Logger, an event.
func (s *syncer) targetReach(e replicate.Reach) {
	line := e.Line("target")
	s.o.Copy.logf("%s", line)
	ev := SyncEvent{Kind: EventTargetBack, Detail: line}
	if e.Down {
		ev.Kind, ev.Err = EventTargetLost, e.Err
	}
	if lg := s.o.Copy.Logger; lg != nil && e.Down {
		lg.Warn(line, "target", e.Server)
	} else if lg != nil {
		lg.Info(line, "target", e.Server)
	}
	s.event(ev)
}

// sourceReach tells the log of the source's outages while the run
// polls it (a poll waits inside the client's retries, --retry-time,
// before it fails): as targetReach, with no event (a poll that fails
// is an EventReconnect).
func (s *syncer) sourceReach(e replicate.Reach) {
	line := e.Line("source")
	s.o.Copy.logf("%s", line)
	if lg := s.o.Copy.Logger; lg != nil && e.Down {
		lg.Warn(line, "source", e.Server)
	} else if lg != nil {
		lg.Info(line, "source", e.Server)
	}
}

func (s *syncer) setMode(m string) {
	s.mu.Lock()
	s.sum.Mode = m
	s.mu.Unlock()
	s.o.Metrics.SetMode(m)
}

// watchBehind looks every second for databases whose oldest unwritten
// change is older than BehindAfter, and for those caught up again.
func (s *syncer) watchBehind(ctx context.Context) {
	everyTick(ctx, time.Second, func() {
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
	})
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
