package progress

import (
	"context"
	"log/slog"
	"time"
)

// StartLog logs the progress of t through lg every Options.Interval (10 s
// by default): one "progress" line with the totals, then one
// "progress db" line for each of the busiest active databases. Stop logs a
// final totals line.
func StartLog(t *Tracker, lg *slog.Logger, o Options) *Display {
	every := o.Interval
	if every <= 0 {
		every = 10 * time.Second
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
				logOnce(t, lg, &r, o, false)
			case <-d.stop:
				logOnce(t, lg, &r, o, true)
				return
			}
		}
	}()
	return d
}

func logOnce(t *Tracker, lg *slog.Logger, r *rates, o Options, final bool) {
	s := t.Snapshot()
	r.update(s)
	attrs := []slog.Attr{
		slog.Int("dbs_done", s.DBsDone), slog.Int("dbs_total", s.DBsTotal),
		slog.Int("dbs_failed", s.DBsFailed), slog.Int("dbs_active", len(s.Active)),
		slog.Int64("docs_read", s.Totals.DocsRead), slog.Int64("docs_written", s.Totals.DocsWritten),
		slog.Int64("doc_write_failures", s.Totals.DocWriteFailures), slog.Int64("bytes", s.Totals.Bytes),
		slog.Duration("elapsed", s.Elapsed.Round(time.Second)),
	}
	if !final {
		attrs = append(attrs, slog.Float64("docs_per_s", round1(r.docsPS)),
			slog.Float64("bytes_per_s", round1(r.bytesPS)))
		if eta, ok := s.ETA(); ok {
			attrs = append(attrs, slog.Duration("eta", eta.Round(time.Second)))
		}
	}
	if o.Extra != nil {
		attrs = append(attrs, o.Extra()...)
	}
	msg := "progress"
	if final {
		msg = "progress final"
	}
	ctx := context.Background()
	lg.LogAttrs(ctx, slog.LevelInfo, msg, attrs...)
	if final {
		return
	}
	for _, a := range r.busiest(s, o.busiest()) {
		lg.LogAttrs(ctx, slog.LevelInfo, "progress db", slog.String("db", a.Name),
			slog.Int64("docs_read", a.DocsRead), slog.Int64("docs_written", a.DocsWritten),
			slog.Int64("docs_total", a.DocsTotal), slog.Int64("bytes", a.Bytes),
			slog.Duration("elapsed", a.Elapsed.Round(time.Second)))
	}
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }
