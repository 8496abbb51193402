// Package metrics holds what a continuous whole-server run (sofa.Sync)
// tells of itself: Prometheus metrics, built with the official client
// library, and a JSON status page, served together by Handler
// (`sofa replicate --continuous --metrics-addr host:port`: /metrics and
// /status).
//
// Each database gets an Observer (DB), a replicate.Observer that the
// one-database engine calls as it reads the changes feed, writes batches
// and checkpoints; the caller adds what only it knows (a database's
// wake, its end, its errors). Hosts report their requests, throttling
// (429/503 answers seen) and limit through AddHost.
//
// Cardinality: per-database series carry one label, db, and there are
// about ten of them per database (no per-database histogram: the lag
// histogram is the total's, a database's last lag is a gauge). Thousands
// of databases make tens of thousands of series, which Prometheus takes
// without trouble; the seq itself is never a label (unbounded values): the
// checkpointed seq is a gauge of its numeric prefix, and the whole seq is
// in /status.
package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sofadb/sofa/replicate"
)

// States of a database in Status.
const (
	StateIdle    = "idle"    // caught up, waiting for changes
	StateQueued  = "queued"  // a change was seen, its catch-up not started
	StateRunning = "running" // a catch-up copy is running
	StateFailed  = "failed"  // the last catch-up failed (retried at the next change or poll)
	StateDeleted = "deleted" // gone from the source (kept on the target)
)

// Set is the metrics and status of one run. Its methods are safe for
// concurrent use. The zero value is not usable: call New.
type Set struct {
	reg *prometheus.Registry

	changes, written, failures, reconnects *prometheus.CounterVec
	changesT, writtenT, failuresT          prometheus.Counter
	reconnectsT, wakes                     prometheus.Counter
	feedReconnects                         prometheus.Counter
	checkpointSeq, pending, lastLag        *prometheus.GaugeVec
	behindDBs, knownDBs                    prometheus.Gauge
	lag, wakeLag                           prometheus.Histogram

	mu  sync.Mutex
	dbs map[string]*DB
	run RunStatus
}

// LagBuckets are the bounds (seconds) of the lag histograms: 5 ms to
// about 80 s.
var LagBuckets = prometheus.ExponentialBuckets(0.005, 2, 15)

// New makes an empty Set with its own registry (plus the Go runtime's and
// the process' collectors).
func New() *Set {
	s := &Set{reg: prometheus.NewRegistry(), dbs: map[string]*DB{}}
	f := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"db"})
	}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	g := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"db"})
	}
	s.changes = f("sofa_db_changes_seen_total", "Rows read from the database's changes feed.")
	s.written = f("sofa_db_docs_written_total", "Revisions acknowledged by the target (docs_written).")
	s.failures = f("sofa_db_doc_write_failures_total", "Revisions the target rejected (doc_write_failures).")
	s.reconnects = f("sofa_db_reconnects_total", "Changes feed reconnections of the database's replication.")
	s.changesT = c("sofa_changes_seen_total", "Rows read from changes feeds, all databases.")
	s.writtenT = c("sofa_docs_written_total", "Revisions acknowledged by the target, all databases.")
	s.failuresT = c("sofa_doc_write_failures_total", "Revisions the target rejected, all databases.")
	s.reconnectsT = c("sofa_reconnects_total", "Changes feed reconnections, all databases.")
	s.wakes = c("sofa_catchups_total", "Catch-up copies started because a database changed.")
	s.feedReconnects = c("sofa_server_feed_reconnects_total", "Reconnections of the server's _db_updates feed (or failed polls).")
	s.checkpointSeq = g("sofa_db_checkpoint_seq", "Numeric prefix of the last checkpointed seq (the whole seq is in /status).")
	s.pending = g("sofa_db_pending_changes", "Changes not yet read, as the feed's pending said (-1: unknown).")
	s.lastLag = g("sofa_db_last_lag_seconds", "Lag of the database's last acknowledged batch.")
	s.behindDBs = prometheus.NewGauge(prometheus.GaugeOpts{Name: "sofa_dbs_behind", Help: "Databases with changes seen and not yet written for longer than the behind threshold."})
	s.knownDBs = prometheus.NewGauge(prometheus.GaugeOpts{Name: "sofa_dbs", Help: "Databases followed."})
	s.lag = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sofa_lag_seconds", Help: "Time from a change appearing on the source's changes feed to its acknowledged write (per batch), all databases.", Buckets: LagBuckets})
	s.wakeLag = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sofa_catchup_lag_seconds", Help: "Time from a database's change being noticed (_db_updates row or poll) to the end of the catch-up copy that wrote it, all databases.", Buckets: LagBuckets})
	s.reg.MustRegister(s.changes, s.written, s.failures, s.reconnects, s.changesT, s.writtenT, s.failuresT,
		s.reconnectsT, s.wakes, s.feedReconnects, s.checkpointSeq, s.pending, s.lastLag, s.behindDBs, s.knownDBs,
		s.lag, s.wakeLag, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return s
}

// Registry is the Set's registry (to add collectors, or gather in tests).
func (s *Set) Registry() *prometheus.Registry { return s.reg }

// HostStats is a host's account at one moment.
type HostStats struct {
	Requests  int64 // HTTP attempts sent
	Retries   int64 // attempts repeated after a retryable failure
	Throttled int64 // 429 and 503 answers seen
	// Overloads counts the outcomes the adaptive limiter took as
	// overload (429, 503, timeouts: limitstats.Stats.Overloads).
	Overloads int64
	InFlight  int // requests in flight now
	Limit     int // the adaptive limit now
}

// AddHost publishes a host's counters, read from stats at every scrape,
// labelled role (source or target: never the host's URL, which may carry
// credentials).
func (s *Set) AddHost(role string, stats func() HostStats) {
	l := prometheus.Labels{"role": role}
	cf := func(name, help string, v func(HostStats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: l}, func() float64 { return v(stats()) })
	}
	gf := func(name, help string, v func(HostStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: l}, func() float64 { return v(stats()) })
	}
	s.reg.MustRegister(
		cf("sofa_host_requests_total", "HTTP attempts sent to the host.", func(h HostStats) float64 { return float64(h.Requests) }),
		cf("sofa_host_retries_total", "HTTP attempts repeated after a retryable failure.", func(h HostStats) float64 { return float64(h.Retries) }),
		cf("sofa_host_throttled_total", "429 and 503 answers from the host (throttling).", func(h HostStats) float64 { return float64(h.Throttled) }),
		cf("sofa_host_overloads_total", "Requests the adaptive limiter counted as overload (429, 503, timeouts).", func(h HostStats) float64 { return float64(h.Overloads) }),
		gf("sofa_host_in_flight", "Requests in flight to the host.", func(h HostStats) float64 { return float64(h.InFlight) }),
		gf("sofa_host_limit", "The adaptive concurrency limit of the host.", func(h HostStats) float64 { return float64(h.Limit) }),
	)
}

// FeedReconnected counts a failure of the server-wide watch (_db_updates
// feed or poll) and records its error in the status.
func (s *Set) FeedReconnected(err error) {
	s.feedReconnects.Inc()
	s.mu.Lock()
	s.run.FeedReconnects++
	if err != nil {
		s.run.LastFeedError = err.Error()
	}
	s.mu.Unlock()
}

// ModeChanges is /status's mode of a continuous copy of one database:
// its own `_changes` feed is watched.
const ModeChanges = "changes"

// SetMode records how the server is watched ("db_updates" or "poll").
func (s *Set) SetMode(mode string) {
	s.mu.Lock()
	s.run.Mode = mode
	s.mu.Unlock()
}

// SetCaughtUp records that the initial catch-up of every database ended.
func (s *Set) SetCaughtUp() {
	s.mu.Lock()
	s.run.InitialCatchUpDone = true
	s.mu.Unlock()
}

// DB returns the database's Observer, made on first use.
func (s *Set) DB(name string) *DB {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.dbs[name]
	if d == nil {
		d = &DB{s: s, name: name, st: DBStatus{State: StateIdle, Pending: -1}}
		s.dbs[name] = d
		s.knownDBs.Set(float64(len(s.dbs)))
	}
	return d
}

// DB is one database's Observer (a replicate.Observer) and status.
type DB struct {
	s    *Set
	name string
	// under s.mu
	st     DBStatus
	behind bool
	only   bool // the one database of a continuous copy (OneDB)
	// what the Observer reported during the current run (see EndRun)
	runChanges, runWritten, runFailures int64
}

var _ replicate.Observer = (*DB)(nil)

// ChangesSeen implements replicate.Observer.
func (d *DB) ChangesSeen(n int, pending int64) {
	d.s.changes.WithLabelValues(d.name).Add(float64(n))
	d.s.changesT.Add(float64(n))
	d.s.pending.WithLabelValues(d.name).Set(float64(pending))
	d.s.mu.Lock()
	d.runChanges += int64(n)
	d.st.Pending = pending
	d.st.ChangesSeen += int64(n)
	d.s.mu.Unlock()
}

// BatchWritten implements replicate.Observer.
func (d *DB) BatchWritten(docs, failures int, lag time.Duration) {
	d.addWritten(int64(docs), int64(failures))
	d.s.lag.Observe(lag.Seconds())
	d.s.lastLag.WithLabelValues(d.name).Set(lag.Seconds())
	d.s.mu.Lock()
	d.runWritten += int64(docs)
	d.runFailures += int64(failures)
	d.s.mu.Unlock()
}

func (d *DB) addWritten(docs, failures int64) {
	if docs > 0 {
		d.s.written.WithLabelValues(d.name).Add(float64(docs))
		d.s.writtenT.Add(float64(docs))
	}
	if failures > 0 {
		d.s.failures.WithLabelValues(d.name).Add(float64(failures))
		d.s.failuresT.Add(float64(failures))
	}
	d.s.mu.Lock()
	d.st.DocsWritten += docs
	d.st.DocWriteFailures += failures
	d.s.mu.Unlock()
}

// Checkpointed implements replicate.Observer.
func (d *DB) Checkpointed(seq string) {
	if n, ok := SeqNumber(seq); ok {
		d.s.checkpointSeq.WithLabelValues(d.name).Set(n)
	}
	d.s.mu.Lock()
	d.st.LastCheckpoint = seq
	d.st.LastCheckpointAt = time.Now()
	d.s.mu.Unlock()
}

// Reconnected implements replicate.Observer.
func (d *DB) Reconnected(err error) {
	d.s.reconnects.WithLabelValues(d.name).Inc()
	d.s.reconnectsT.Inc()
	d.s.mu.Lock()
	if err != nil {
		d.st.LastError = err.Error()
	}
	d.s.mu.Unlock()
}

// CaughtUp implements replicate.Observer. The database of OneDB also
// ends the run's initial catch-up the first time it catches up.
func (d *DB) CaughtUp(caughtUp bool) {
	if caughtUp {
		d.s.pending.WithLabelValues(d.name).Set(0)
		d.s.mu.Lock()
		d.st.Pending = 0
		if d.only {
			d.s.run.InitialCatchUpDone = true
		}
		d.s.mu.Unlock()
	}
}

// OneDB returns the Observer of a continuous copy of the one database
// name (DB, running): its first catch-up is the run's initial catch-up
// (/status's initial_catch_up_done), which a copy of many databases
// reports with SetCaughtUp.
func (s *Set) OneDB(name string) *DB {
	d := s.DB(name)
	s.mu.Lock()
	s.run.Mode = ModeChanges
	d.only = true
	d.st.State = StateRunning
	s.mu.Unlock()
	return d
}

// SetState records the database's state (one of the State constants).
func (d *DB) SetState(state string) {
	d.s.mu.Lock()
	d.st.State = state
	d.s.mu.Unlock()
}

// BeginRun records the start of a copy of the database and forgets what
// the Observer reported during the previous one; changed says it is a
// catch-up started because the database changed (sofa_catchups_total),
// not the run's initial copy.
func (d *DB) BeginRun(changed bool) {
	if changed {
		d.s.wakes.Inc()
	}
	d.s.mu.Lock()
	d.st.State = StateRunning
	d.runChanges, d.runWritten, d.runFailures = 0, 0, 0
	d.s.mu.Unlock()
}

// EndRun records the end of a catch-up copy: its totals (what the engine
// counted: those the Observer did not already report are added, so an
// engine that does not call the Observer is still counted once), its
// checkpoint, its error (nil: ok), and, when ok and a change was waiting
// (noticed is its time, zero if none), the catch-up lag.
func (d *DB) EndRun(changes, written, failures int64, checkpoint string, noticed time.Time, err error) {
	d.s.mu.Lock()
	dc, dw, df := changes-d.runChanges, written-d.runWritten, failures-d.runFailures
	d.s.mu.Unlock()
	if dc > 0 {
		d.s.changes.WithLabelValues(d.name).Add(float64(dc))
		d.s.changesT.Add(float64(dc))
	}
	d.addWritten(max(dw, 0), max(df, 0))
	if checkpoint != "" {
		d.Checkpointed(checkpoint)
	}
	if err == nil && !noticed.IsZero() {
		d.s.wakeLag.Observe(time.Since(noticed).Seconds())
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	d.st.Runs++
	d.st.LastRunEnd = time.Now()
	if dc > 0 {
		d.st.ChangesSeen += dc
	}
	if err != nil {
		d.st.State = StateFailed
		d.st.LastError = err.Error()
		return
	}
	d.st.State = StateIdle
}

// SetBehind records whether the database is behind; it returns true when
// that changed (the caller logs the edge).
func (d *DB) SetBehind(behind bool) bool {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	if d.behind == behind {
		return false
	}
	d.behind = behind
	d.st.Behind = behind
	n := 0
	for _, x := range d.s.dbs {
		if x.behind {
			n++
		}
	}
	d.s.behindDBs.Set(float64(n))
	return true
}

// SeqNumber is the numeric prefix of a seq ("42-g1AAA..." and "42" give
// 42), false when it has none.
func SeqNumber(seq string) (float64, bool) {
	p, _, _ := strings.Cut(strings.Trim(seq, `"`), "-")
	n, err := strconv.ParseFloat(p, 64)
	return n, err == nil
}

// DBStatus is one database in /status.
type DBStatus struct {
	State            string    `json:"state"`
	Behind           bool      `json:"behind"`
	LastCheckpoint   string    `json:"last_checkpoint,omitempty"`
	LastCheckpointAt time.Time `json:"last_checkpoint_at,omitzero"`
	// Pending is the feed's last pending count (-1: unknown).
	Pending          int64     `json:"pending"`
	ChangesSeen      int64     `json:"changes_seen"`
	DocsWritten      int64     `json:"docs_written"`
	DocWriteFailures int64     `json:"doc_write_failures"`
	Runs             int64     `json:"runs"`
	LastRunEnd       time.Time `json:"last_run_end,omitzero"`
	LastError        string    `json:"last_error,omitempty"`
}

// RunStatus is the run's part of /status.
type RunStatus struct {
	Mode               string `json:"mode"` // db_updates or poll (server mode), changes (one database's feed)
	InitialCatchUpDone bool   `json:"initial_catch_up_done"`
	FeedReconnects     int64  `json:"feed_reconnects"`
	LastFeedError      string `json:"last_feed_error,omitempty"`
}

// Status is the JSON of /status.
type Status struct {
	RunStatus
	DBsBehind int                 `json:"dbs_behind"`
	DBs       map[string]DBStatus `json:"dbs"`
}

// Status returns a copy of the status.
func (s *Set) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{RunStatus: s.run, DBs: make(map[string]DBStatus, len(s.dbs))}
	for _, name := range slices.Sorted(maps.Keys(s.dbs)) {
		d := s.dbs[name]
		st.DBs[name] = d.st
		if d.behind {
			st.DBsBehind++
		}
	}
	return st
}

// Handler serves /metrics (Prometheus text format) and /status (JSON).
func (s *Set) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s.Status())
	})
	return mux
}

// Serve listens on addr (host:port; port 0 picks a free one) and serves
// Handler until ctx ends. It returns the address it listens on.
func (s *Set) Serve(ctx context.Context, addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("metrics: %w", err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.FeedReconnected(fmt.Errorf("metrics server: %w", err))
		}
	}()
	return ln.Addr().String(), nil
}
