package progress

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// StartLog logs the progress of t through lg, looking every
// Options.Interval (10 s by default): one "progress" line with the totals,
// then one "progress db" line for each of the busiest active databases,
// when a counter changed since the last line; while none does, one
// "progress waiting" line every Options.Quiet (a minute by default) saying
// for how long and, with Options.Waiting, on what. Stop logs a final
// totals line.
func StartLog(t *Tracker, lg *slog.Logger, o Options) *Display {
	every := o.Interval
	if every <= 0 {
		every = 10 * time.Second
	}
	gate := Gate{Quiet: o.Quiet}
	if gate.Quiet <= 0 {
		gate.Quiet = DefaultQuiet(every)
	}
	d := newDisplay()
	go func() {
		defer close(d.done)
		var r rates
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				logOnce(t, lg, &r, o, &gate)
			case <-d.stop:
				logOnce(t, lg, &r, o, nil)
				return
			}
		}
	}()
	return d
}

// logOnce logs the lines of one tick; a nil gate means the final line.
func logOnce(t *Tracker, lg *slog.Logger, r *rates, o Options, gate *Gate) {
	s := t.Snapshot()
	final := gate == nil
	var stalled time.Duration
	if !final {
		// the counters the line prints (not DocsTotal: a database's
		// document count becoming known repeated the line as it was)
		tc := s.Totals
		key := fmt.Sprint(s.DBsTotal, s.DBsDone, s.DBsFailed, s.DBsInterrupted, len(s.Active),
			tc.DocsRead, tc.DocsWritten, tc.DocWriteFailures, tc.Bytes)
		var print bool
		if print, stalled = gate.Check(key, time.Now()); !print {
			return
		}
	}
	r.update(s)
	if stalled > 0 {
		// nothing moved for no_change_for: the smoothed rate of before
		// would still show, and an eta as if the run went on
		r.docsPS, r.bytesPS = 0, 0
	}
	waiting := ""
	if o.Waiting != nil {
		waiting = o.Waiting(stalled > 0)
	}
	attrs := []slog.Attr{
		slog.Int("dbs_done", s.DBsDone), dbsTotalAttr(s, final),
		slog.Int("dbs_failed", s.DBsFailed), slog.Int("dbs_interrupted", s.DBsInterrupted),
		slog.Int("dbs_active", len(s.Active)),
		slog.Int64("docs_read", s.Totals.DocsRead), slog.Int64("docs_written", s.Totals.DocsWritten),
		slog.Int64("doc_write_failures", s.Totals.DocWriteFailures), slog.Int64("bytes", s.Totals.Bytes),
		slog.Duration("elapsed", s.Elapsed.Round(time.Second)),
	}
	if !final {
		attrs = append(attrs, slog.Float64("docs_per_s", round1(r.docsPS)),
			slog.Int64("bytes_per_s", int64(r.bytesPS+0.5)))
		if eta, ok := s.ETA(); ok && stalled == 0 {
			attrs = append(attrs, slog.Duration("eta", eta.Round(time.Second)))
		}
	}
	if o.Extra != nil {
		attrs = append(attrs, o.Extra()...)
	}
	msg := "progress"
	switch {
	case final:
		msg = "progress final"
	case stalled > 0:
		msg = "progress waiting"
		attrs = append(attrs, slog.Duration("no_change_for", roundWait(stalled)))
		if waiting != "" {
			attrs = append(attrs, slog.String("waiting", waiting))
		}
	}
	ctx := context.Background()
	lg.LogAttrs(ctx, slog.LevelInfo, msg, attrs...)
	if final || stalled > 0 {
		return
	}
	for _, a := range r.busiest(s, o.busiest()) {
		// docs_read and docs_written count revisions (as CouchDB's
		// replication stats do); the source's doc_count + doc_del_count
		// counts documents, so it is not named like them.
		attrs := []slog.Attr{slog.String("db", a.Name),
			slog.Int64("docs_read", a.DocsRead), slog.Int64("docs_written", a.DocsWritten)}
		if a.DocsTotal > 0 {
			attrs = append(attrs, slog.Int64("source_doc_count", a.DocsTotal))
		}
		attrs = append(attrs, slog.Int64("bytes", a.Bytes), slog.Duration("elapsed", a.Elapsed.Round(time.Second)))
		lg.LogAttrs(ctx, slog.LevelInfo, "progress db", attrs...)
	}
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

// roundWait rounds a wait for display: to the second from 10 s on, else to
// a tenth of a second.
func roundWait(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

// dbsTotalAttr is dbs_total, "unknown" while the databases are only known
// as they come (the count of those begun is no total until the end).
func dbsTotalAttr(s Snapshot, final bool) slog.Attr {
	if s.TotalUnknown && !final {
		return slog.String("dbs_total", "unknown")
	}
	return slog.Int("dbs_total", s.DBsTotal)
}
