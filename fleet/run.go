package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/sofadb/sofa/internal/limit"
	"github.com/sofadb/sofa/replicate"
)

// Job copies one database. It reports its counters in the DBResult (Run
// fills Name, Duration, Status and Error; counters left at zero are taken
// from what the job told p) and may feed p as it goes (never nil). A
// non-nil error marks the database failed; documents it could not copy
// go in DBResult.Failures and DocWriteFailures instead.
//
// When ctx is cancelled (SIGINT) the job should stop reading, write the
// checkpoint that covers what the target acknowledged (using
// context.WithoutCancel for that last write) and return ctx.Err().
type Job func(ctx context.Context, db string, p DBProgress) (DBResult, error)

// DefaultMaxDBs caps databases in flight when Options.MaxDBs is zero.
const DefaultMaxDBs = 64

// Options configure Run. The zero value runs up to DefaultMaxDBs databases
// at once with no limiter feedback.
type Options struct {
	// Limiters are the per-host limiters every request of the jobs goes
	// through (typically the source's and the target's host; the same one
	// twice is fine). Run reads their limits and demand to decide how many
	// databases run at once. Empty means MaxDBs decides alone.
	Limiters []Limiter
	// MaxDBs caps databases in flight (--max-dbs). Zero means DefaultMaxDBs.
	MaxDBs int
	// Fixed runs MaxDBs databases at once whatever the limiters say
	// (--fixed).
	Fixed bool
	// IdealDuration spreads the starts over this duration to lower server
	// load (--ideal-duration): database i of n starts no earlier than
	// i/n × IdealDuration after Run began. Starts never wait longer than
	// that, so a run behind schedule goes as fast as the limits allow. Zero
	// means no pacing.
	IdealDuration time.Duration
	// Progress hears of each database started and finished. Nil means
	// none.
	Progress Progress
	// Logger receives one line per database (debug when ok, warn
	// otherwise) and concurrency decisions (debug). Nil means none.
	Logger *slog.Logger
	// Tick is how often the number of databases in flight is reconsidered
	// while Run waits for room. Zero means 20 ms.
	Tick time.Duration
	// StopWhenLost stops the run when a database's job fails with
	// replicate.ErrUnreachable (its server gave no answer within the
	// client's retry budget): no further database starts, those running
	// end as they do, the others are not_started, and Run returns that
	// error. False: every database is tried whatever the others did.
	StopWhenLost bool
}

// Lost is the error that stops a run when database db's job failed with
// err, a server lost (replicate.ErrUnreachable): see Options.StopWhenLost.
// A caller that runs databases one after the other itself stops the same
// way.
func Lost(db string, err error) error {
	return fmt.Errorf("stopped, no further database started: %s: %w", db, err)
}

// Run calls job once for every name in dbs, many at once, and returns a
// Summary with one result per database, in the order of dbs. A failing
// database does not stop the others (but see Options.StopWhenLost); a job
// that panics fails its database only.
//
// How many databases run at once: each limiter's demand (requests in
// flight plus waiting) divided by the running databases estimates the
// requests one database keeps busy on that host; its limit divided by that
// gives the databases the host can take (plus half, so the host never
// waits for a database to start). Run starts a database while fewer
// than the smallest of these (and MaxDBs) run. Jobs never hold a limiter
// slot between requests, so this only shapes the work; the limiters still
// bound every request.
//
// When ctx is cancelled Run starts no more databases, waits for the running
// jobs to return, marks the others not_started and returns the Summary with
// ctx.Err(). With Options.StopWhenLost, a server lost (see there) stops
// the run the same way, with the lost server's error. Otherwise the error
// is nil: per-database outcomes are in the Summary.
func Run(ctx context.Context, dbs []string, job Job, opts Options) (Summary, error) {
	s := newScheduler(opts)
	start := time.Now()
	results := make([]DBResult, len(dbs))
	started := make([]bool, len(dbs))
	// admission stops on ctx's end, or when a server is lost
	actx, stop := context.WithCancel(ctx)
	defer stop()
	var lostOnce sync.Once
	var lostErr error
	var wg sync.WaitGroup
	for i, db := range dbs {
		if opts.IdealDuration > 0 {
			at := start.Add(time.Duration(float64(opts.IdealDuration) * float64(i) / float64(len(dbs))))
			if limit.Sleep(actx, time.Until(at)) != nil {
				break
			}
		}
		if !s.admit(actx) {
			break
		}
		started[i] = true
		wg.Go(func() {
			defer s.release()
			var err error
			results[i], err = runOne(ctx, db, job, opts)
			if opts.StopWhenLost && ctx.Err() == nil && errors.Is(err, replicate.ErrUnreachable) {
				lostOnce.Do(func() {
					lostErr = Lost(db, err)
					stop()
				})
			}
		})
	}
	wg.Wait()

	sum := Summary{Started: start, Concurrency: s.concurrency()}
	for i, db := range dbs {
		r := results[i]
		if !started[i] {
			r = DBResult{Name: db, Status: StatusNotStarted}
		}
		sum.Add(r)
	}
	sum.Duration = Duration(time.Since(start))
	for _, l := range uniqueLimiters(opts.Limiters) {
		sum.Hosts = append(sum.Hosts, l.Stats())
	}
	if err := ctx.Err(); err != nil && sum.DBsOK+sum.DBsPartial+sum.DBsFailed < sum.DBsTotal {
		sum.Interrupted = true
		return sum, err
	}
	return sum, lostErr
}

// runOne runs one job, isolating its panics, and completes its result.
func runOne(ctx context.Context, db string, job Job, opts Options) (r DBResult, err error) {
	dp := NoDBProgress
	if opts.Progress != nil {
		if b := opts.Progress.Begin(db); b != nil {
			dp = b
		}
	}
	p := &counted{DBProgress: dp}
	t0 := time.Now()
	func() {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("fleet: job panicked: %v", v)
				if opts.Logger != nil {
					opts.Logger.Error("job panicked", "db", db, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				}
			}
		}()
		r, err = job(ctx, db, p)
	}()
	r.Name = db
	r.Duration = Duration(time.Since(t0))
	if r.DocsRead == 0 && r.DocsWritten == 0 && r.Bytes == 0 {
		// nothing reported (stopped early): what progress was told
		r.DocsRead, r.DocsWritten = p.read.Load(), p.written.Load()
		r.DocWriteFailures, r.Bytes = p.failures.Load(), p.bytes.Load()
	}
	Decide(ctx, &r, err)
	EndProgress(opts.Progress, db, dp, r.Status)
	if lg := opts.Logger; lg != nil {
		lvl := slog.LevelDebug
		if r.Status != StatusOK {
			lvl = slog.LevelWarn
		}
		lg.Log(ctx, lvl, "database "+string(r.Status), "db", db, "docs_read", r.DocsRead,
			"docs_written", r.DocsWritten, "doc_write_failures", r.DocWriteFailures,
			"duration", time.Duration(r.Duration).Round(time.Millisecond), "error", r.Error)
	}
	return r, err
}

// EndProgress tells p (nil: nobody) that database db ended with status:
// EndInterrupted or EndLeftOut where p counts those apart
// (InterruptedProgress, LeftOutProgress), else End.
func EndProgress(p Progress, db string, dp DBProgress, status Status) {
	ip, interruptedApart := p.(InterruptedProgress)
	lp, leftOutApart := p.(LeftOutProgress)
	switch {
	case p == nil:
	case interruptedApart && status == StatusInterrupted:
		ip.EndInterrupted(db, dp)
	case leftOutApart && status == StatusLeftOut:
		lp.EndLeftOut(db, dp)
	default:
		p.End(db, dp, status == StatusFailed)
	}
}

// Decide sets the status of one database's result from the error its
// job returned (and its Error from err), unless the job set a status:
// interrupted (err caused by the cancellation of ctx), left out (a
// *LeftOutError), failed (any other error), partial (revisions not
// copied), else ok. Every many-database
// operation decides here, whether its databases ran under Run or one
// after another.
func Decide(ctx context.Context, r *DBResult, err error) {
	if err != nil {
		r.Error = err.Error()
	}
	if r.Status != "" {
		return
	}
	var lo *LeftOutError
	switch {
	case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		r.Status = StatusInterrupted
	case errors.As(err, &lo):
		r.Status, r.Error = StatusLeftOut, lo.Reason
	case err != nil:
		r.Status = StatusFailed
	case r.DocWriteFailures > 0 || len(r.Failures) > 0:
		r.Status = StatusPartial
	default:
		r.Status = StatusOK
	}
}

func uniqueLimiters(ls []Limiter) []Limiter {
	var out []Limiter
	for _, l := range ls {
		if l != nil && !contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

func contains(ls []Limiter, l Limiter) bool {
	for _, x := range ls {
		if x == l {
			return true
		}
	}
	return false
}

// scheduler decides how many databases run at once.
type scheduler struct {
	opts     Options
	limiters []Limiter
	max      int
	tick     time.Duration

	mu      sync.Mutex
	running int
	peak    int
	freed   chan struct{} // signalled (non-blocking) when a job ends
	target  int
	sampled time.Time // when target was last recomputed
	perDB   []float64 // per limiter: smoothed requests one running db keeps busy
	changes []TargetChange
	dropped int
}

const maxChanges = 256

func newScheduler(o Options) *scheduler {
	s := &scheduler{opts: o, limiters: uniqueLimiters(o.Limiters), max: o.MaxDBs, tick: o.Tick}
	if s.max <= 0 {
		s.max = DefaultMaxDBs
	}
	if s.tick <= 0 {
		s.tick = 20 * time.Millisecond
	}
	s.freed = make(chan struct{}, 1)
	s.perDB = make([]float64, len(s.limiters))
	for i := range s.perDB {
		s.perDB[i] = 1
	}
	return s
}

// admit blocks until one more database may start, and counts it as
// running. It returns false if ctx ends first.
func (s *scheduler) admit(ctx context.Context) bool {
	var tick *time.Ticker
	for {
		if ctx.Err() != nil {
			return false
		}
		s.mu.Lock()
		if s.running < s.targetLocked() {
			s.running++
			s.peak = max(s.peak, s.running)
			s.mu.Unlock()
			if tick != nil {
				tick.Stop()
			}
			return true
		}
		s.mu.Unlock()
		if tick == nil {
			tick = time.NewTicker(s.tick)
			defer tick.Stop()
		}
		select {
		case <-ctx.Done():
			return false
		case <-s.freed:
		case <-tick.C:
		}
	}
}

func (s *scheduler) release() {
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// targetLocked returns the number of databases allowed in flight. It is
// recomputed at most once per tick, from a fresh sample of the limiters:
// between samples newly started jobs have not made their requests yet and
// would make a database look cheaper than it is. For the same reason the
// target grows by at most half (plus one) per sample; it falls at once.
func (s *scheduler) targetLocked() int {
	now := time.Now()
	if s.target != 0 && now.Sub(s.sampled) < s.tick {
		return s.target
	}
	s.sampled = now
	t := s.max
	var why []string
	if !s.opts.Fixed {
		for i, l := range s.limiters {
			inFlight, waiting, lim := l.Load()
			if demand := inFlight + waiting; s.running > 0 && demand > 0 {
				s.perDB[i] += 0.5 * (float64(demand)/float64(s.running) - s.perDB[i])
			}
			// Half again as many as exactly enough: databases start and
			// end unevenly (a job's last batches use fewer requests), and
			// a few requests waiting in the limiter cost nothing.
			n := max(1, int(math.Ceil(1.5*float64(lim)/s.perDB[i])))
			t = min(t, n)
			why = append(why, fmt.Sprintf("host %s limit %d, %.1f requests per db", l.Name(), lim, s.perDB[i]))
		}
		if s.target != 0 {
			t = min(t, s.target+max(1, s.target/2))
		}
	}
	if t != s.target {
		if s.target != 0 || t != s.max {
			s.recordLocked(TargetChange{Time: now, From: s.target, To: t, Detail: strings.Join(why, "; ")})
		}
		s.target = t
	}
	return t
}

func (s *scheduler) recordLocked(c TargetChange) {
	if lg := s.opts.Logger; lg != nil {
		lg.Debug("databases in flight", "from", c.From, "to", c.To, "running", s.running, "detail", c.Detail)
	}
	if len(s.changes) == maxChanges {
		copy(s.changes, s.changes[1:])
		s.changes = s.changes[:maxChanges-1]
		s.dropped++
	}
	s.changes = append(s.changes, c)
}

func (s *scheduler) concurrency() Concurrency {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Concurrency{Max: s.max, Peak: s.peak, Fixed: s.opts.Fixed,
		Changes: s.changes, ChangesDropped: s.dropped}
}
