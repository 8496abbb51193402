// Package progress is the live progress model of a run and its two
// displays. The engine and the fleet layer feed a Tracker (databases
// started and finished) and per-database DB counters (atomic adds, cheap on
// the hot path); displays read snapshots of it on their own clock: a
// terminal display with bars (StartTerminal) or periodic log lines
// (StartLog). Start picks one from whether the output is a terminal.
//
// A nil *Tracker and a nil *DB accept every call and do nothing, so code
// that reports progress never checks whether anyone is watching.
package progress

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Counts are one database's (or the run's) counters, named as CouchDB's
// replication stats.
type Counts struct {
	DocsRead         int64 `json:"docs_read"`
	DocsWritten      int64 `json:"docs_written"`
	DocWriteFailures int64 `json:"doc_write_failures"`
	// Bytes is the payload moved (bodies and attachments).
	Bytes int64 `json:"bytes"`
	// DocsTotal is the number of documents expected (e.g. doc_count +
	// doc_del_count of the source); 0 means unknown.
	DocsTotal int64 `json:"docs_total,omitempty"`
}

func (c *Counts) add(o Counts) {
	c.DocsRead += o.DocsRead
	c.DocsWritten += o.DocsWritten
	c.DocWriteFailures += o.DocWriteFailures
	c.Bytes += o.Bytes
	c.DocsTotal += o.DocsTotal
}

// DB holds one database's live counters. Its methods are safe for
// concurrent use and do nothing on a nil *DB.
type DB struct {
	name  string
	start time.Time

	docsRead, docsWritten, docFailures, bytes, docsTotal atomic.Int64
}

// Name returns the database name ("" for nil).
func (d *DB) Name() string {
	if d == nil {
		return ""
	}
	return d.name
}

// AddDocsRead counts documents read from the source.
func (d *DB) AddDocsRead(n int64) {
	if d != nil {
		d.docsRead.Add(n)
	}
}

// AddDocsWritten counts documents written to the target.
func (d *DB) AddDocsWritten(n int64) {
	if d != nil {
		d.docsWritten.Add(n)
	}
}

// AddDocWriteFailures counts documents the target rejected.
func (d *DB) AddDocWriteFailures(n int64) {
	if d != nil {
		d.docFailures.Add(n)
	}
}

// AddBytes counts payload bytes moved.
func (d *DB) AddBytes(n int64) {
	if d != nil {
		d.bytes.Add(n)
	}
}

// SetDocsTotal sets the number of documents expected; 0 means unknown.
func (d *DB) SetDocsTotal(n int64) {
	if d != nil {
		d.docsTotal.Store(n)
	}
}

// Counts reads the counters. Each is read atomically; together they are a
// near-consistent view.
func (d *DB) Counts() Counts {
	if d == nil {
		return Counts{}
	}
	return Counts{
		DocsRead: d.docsRead.Load(), DocsWritten: d.docsWritten.Load(),
		DocWriteFailures: d.docFailures.Load(), Bytes: d.bytes.Load(),
		DocsTotal: d.docsTotal.Load(),
	}
}

// fraction is how far the database is, in [0, 1]; 0 when its total is
// unknown.
func (c Counts) fraction() float64 {
	if c.DocsTotal <= 0 {
		return 0
	}
	return min(1, float64(c.DocsWritten+c.DocWriteFailures)/float64(c.DocsTotal))
}

// Tracker is the progress model of one run. It is safe for concurrent use;
// a nil *Tracker ignores every call.
type Tracker struct {
	start time.Time

	mu        sync.Mutex
	dbsTotal  int
	growing   bool // the total is not known: it counts the databases begun
	dbsDone   int  // finished, failed ones included
	dbsFailed int
	dbsInter  int    // stopped by an interruption (not in dbsDone)
	finished  Counts // sums over finished and interrupted databases
	// doneSized counts the finished databases (dbsDone) whose DocsTotal
	// was known, doneDocs sums those totals (Fraction's weights).
	doneSized int
	doneDocs  int64
	active    []*DB
}

// NewTracker returns a tracker whose clock starts now.
func NewTracker() *Tracker { return &Tracker{start: time.Now()} }

// SetTotal sets the number of databases the run will process; a
// negative dbs says it is not known: the total then counts the databases
// begun.
func (t *Tracker) SetTotal(dbs int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.dbsTotal, t.growing = dbs, dbs < 0
	if t.growing {
		t.dbsTotal = 0
	}
	t.mu.Unlock()
}

// Begin starts tracking a database and returns its counters (nil for a nil
// tracker, which is still safe to use).
func (t *Tracker) Begin(name string) *DB {
	if t == nil {
		return nil
	}
	d := &DB{name: name, start: time.Now()}
	t.mu.Lock()
	t.active = append(t.active, d)
	if t.growing {
		t.dbsTotal++
	}
	t.mu.Unlock()
	return d
}

// End stops tracking d and adds its counters to the totals. Ending a
// database twice, or one this tracker did not begin, does nothing.
func (t *Tracker) End(d *DB, failed bool) { t.end(d, failed, false) }

// EndInterrupted is End for a database stopped by an interruption: it is
// counted interrupted, not done.
func (t *Tracker) EndInterrupted(d *DB) { t.end(d, false, true) }

// EndLeftOut is End for a database the run left out after it began
// (deleted at the source): it leaves the count of databases (DBsTotal)
// and is counted neither done nor failed; its revisions read and written
// and its bytes stay in the totals, its doc_write_failures do not (as a
// fleet.Summary counts it).
func (t *Tracker) EndLeftOut(d *DB) {
	if t == nil || d == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.remove(d) {
		return
	}
	t.dbsTotal = max(0, t.dbsTotal-1)
	c := d.Counts()
	c.DocWriteFailures, c.DocsTotal = 0, 0
	t.finished.add(c)
}

// remove takes d out of the active databases (under mu); false: it was
// not there.
func (t *Tracker) remove(d *DB) bool {
	i := slices.Index(t.active, d)
	if i < 0 {
		return false
	}
	t.active = slices.Delete(t.active, i, i+1)
	return true
}

func (t *Tracker) end(d *DB, failed, interrupted bool) {
	if t == nil || d == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.remove(d) {
		return
	}
	switch {
	case interrupted:
		t.dbsInter++
	case failed:
		t.dbsDone++
		t.dbsFailed++
	default:
		t.dbsDone++
	}
	c := d.Counts()
	if !interrupted && c.DocsTotal > 0 {
		t.doneSized++
		t.doneDocs += c.DocsTotal
	}
	t.finished.add(c)
}

// Active is one database in progress in a Snapshot.
type Active struct {
	Name    string
	Elapsed time.Duration
	Counts
}

// Snapshot is a Tracker's state at one moment.
type Snapshot struct {
	Elapsed  time.Duration
	DBsTotal int
	// TotalUnknown: the number of databases is not known beforehand (an
	// archive read in order): DBsTotal counts those begun so far, and
	// Fraction and ETA are unknown.
	TotalUnknown bool
	DBsDone      int // finished, failed ones included
	DBsFailed    int
	// DBsInterrupted counts the databases stopped by an interruption.
	DBsInterrupted int
	// Totals sums finished and active databases.
	Totals Counts
	// Active lists the databases in progress, in start order.
	Active []Active
	// doneSized and doneDocs are the Tracker's (Fraction's weights).
	doneSized int
	doneDocs  int64
}

// Snapshot reads the tracker. A nil tracker gives the zero Snapshot.
func (t *Tracker) Snapshot() Snapshot {
	if t == nil {
		return Snapshot{}
	}
	now := time.Now()
	t.mu.Lock()
	s := Snapshot{
		Elapsed: now.Sub(t.start), DBsTotal: t.dbsTotal, TotalUnknown: t.growing, DBsDone: t.dbsDone,
		DBsFailed: t.dbsFailed, DBsInterrupted: t.dbsInter, Totals: t.finished,
		Active: make([]Active, 0, len(t.active)), doneSized: t.doneSized, doneDocs: t.doneDocs,
	}
	act := slices.Clone(t.active)
	t.mu.Unlock()
	for _, d := range act {
		c := d.Counts()
		s.Totals.add(c)
		s.Active = append(s.Active, Active{Name: d.name, Elapsed: now.Sub(d.start), Counts: c})
	}
	return s
}

// Fraction estimates how much of the run is done, in [0, 1], weighing
// each database by its documents (DocsTotal): finished databases count
// whole, active ones by their documents written against their total, and
// a database whose total is not known (not begun yet, or not reported)
// weighs the mean of the known ones. Without any known total every
// database weighs one. 0 when the number of databases is unknown
// (TotalUnknown: the databases begun so far are no total).
func (s Snapshot) Fraction() float64 {
	if s.DBsTotal <= 0 || s.TotalUnknown {
		return 0
	}
	sized, docs := s.doneSized, float64(s.doneDocs)
	for _, a := range s.Active {
		if a.DocsTotal > 0 {
			sized++
			docs += float64(a.DocsTotal)
		}
	}
	mean := 1.0
	if sized > 0 && docs > 0 {
		mean = docs / float64(sized)
	} else {
		sized, docs = 0, 0
	}
	done := float64(s.doneDocs) + float64(s.DBsDone-s.doneSized)*mean
	if sized == 0 {
		done = float64(s.DBsDone)
	}
	for _, a := range s.Active {
		if a.DocsTotal > 0 {
			done += a.fraction() * float64(a.DocsTotal)
		}
	}
	whole := docs + float64(s.DBsTotal-sized)*mean
	if whole <= 0 {
		return 0
	}
	return min(1, max(0, done/whole))
}

// ETA estimates the time left from the elapsed time and Fraction; ok is
// false while nothing measurable is done.
func (s Snapshot) ETA() (time.Duration, bool) {
	f := s.Fraction()
	if f <= 0 || s.Elapsed <= 0 {
		return 0, false
	}
	return time.Duration(float64(s.Elapsed) * (1 - f) / f), true
}
