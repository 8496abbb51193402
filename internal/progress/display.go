package progress

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/term"
)

// Options configure a display. The zero value is usable.
type Options struct {
	// Interval is the time between log lines or screen updates. Zero means
	// 10 s for logs and 200 ms for the terminal.
	Interval time.Duration
	// Busiest is how many of the busiest active databases get a bar or a
	// log line each. Zero means 5; negative means none.
	Busiest int
	// Extra adds fields to every total line or bar, e.g. the concurrency
	// limits of the hosts. Nil means none.
	Extra func() []slog.Attr
	// Quiet is, for log lines, the time between "progress waiting" lines
	// while nothing changes (a line is otherwise logged only when a
	// counter changed). Zero means DefaultQuiet(Interval).
	Quiet time.Duration
	// Waiting describes what the run waits on, e.g. "retrying: 12 requests
	// retried, waiting on host db:5984 (4 in flight)". It is called at
	// every log line: with stalled false on a line logged because a
	// counter changed (it counts afresh from there), with stalled true on
	// a "progress waiting" line, which shows its text. Nil means none.
	Waiting func(stalled bool) string
}

func (o Options) busiest() int {
	if o.Busiest == 0 {
		return 5
	}
	return max(o.Busiest, 0)
}

// Display renders a Tracker until Stop.
type Display struct {
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func newDisplay() *Display {
	return &Display{stop: make(chan struct{}), done: make(chan struct{})}
}

// Stop renders a final state and returns once the display is finished.
// It is safe to call more than once and on a nil *Display.
func (d *Display) Stop() {
	if d == nil {
		return
	}
	d.stopOnce.Do(func() { close(d.stop) })
	<-d.done
}

// Start shows t on f: bars when f is a terminal, else log lines through lg
// (slog.Default() when nil).
func Start(t *Tracker, f *os.File, lg *slog.Logger, o Options) *Display {
	if f != nil && term.IsTerminal(int(f.Fd())) {
		return StartTerminal(t, f, o)
	}
	return StartLog(t, cmp.Or(lg, slog.Default()), o)
}

// rates turns successive snapshots into smoothed per-second rates and
// ranks active databases by recent activity.
type rates struct {
	last     time.Duration
	lastTot  Counts
	docsPS   float64 // docs written per second, smoothed
	bytesPS  float64
	seen     bool
	prevByDB map[string]Counts
}

const smoothing = 0.3 // weight of the newest interval

func (r *rates) update(s Snapshot) {
	if r.seen {
		if dt := (s.Elapsed - r.last).Seconds(); dt > 0 {
			d := float64(s.Totals.DocsWritten-r.lastTot.DocsWritten) / dt
			b := float64(s.Totals.Bytes-r.lastTot.Bytes) / dt
			r.docsPS += smoothing * (d - r.docsPS)
			r.bytesPS += smoothing * (b - r.bytesPS)
		}
	} else if s.Elapsed > 0 {
		r.docsPS = float64(s.Totals.DocsWritten) / s.Elapsed.Seconds()
		r.bytesPS = float64(s.Totals.Bytes) / s.Elapsed.Seconds()
	}
	r.seen, r.last, r.lastTot = true, s.Elapsed, s.Totals
}

// busiest returns up to n active databases, most bytes and documents moved
// since the previous call first (ties: longest running first).
func (r *rates) busiest(s Snapshot, n int) []Active {
	type scored struct {
		a     Active
		score int64
	}
	next := make(map[string]Counts, len(s.Active))
	sc := make([]scored, 0, len(s.Active))
	for _, a := range s.Active {
		p := r.prevByDB[a.Name]
		sc = append(sc, scored{a, (a.Bytes - p.Bytes) + 1000*(a.DocsWritten-p.DocsWritten)})
		next[a.Name] = a.Counts
	}
	r.prevByDB = next
	slices.SortStableFunc(sc, func(x, y scored) int { return cmp.Compare(y.score, x.score) })
	out := make([]Active, 0, min(n, len(sc)))
	for i := 0; i < len(sc) && i < n; i++ {
		out = append(out, sc[i].a)
	}
	return out
}

// humanCount formats n with k/M/G suffixes (1000-based).
func humanCount(n float64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fG", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", n/1e6)
	case n >= 1e4:
		return fmt.Sprintf("%.0fk", n/1e3)
	case n >= 1e3:
		return fmt.Sprintf("%.1fk", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}

// humanBytes formats n bytes with KiB/MiB/GiB suffixes.
func humanBytes(n float64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", n/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", n/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", n/(1<<10))
	}
	return fmt.Sprintf("%.0fB", n)
}

// attrsText renders attributes as "k=v k=v".
func attrsText(w io.Writer, attrs []slog.Attr) {
	for _, a := range attrs {
		fmt.Fprintf(w, " %s=%s", a.Key, a.Value)
	}
}
