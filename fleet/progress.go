package fleet

import (
	"sync/atomic"

	"github.com/sofadb/sofa/limitstats"
)

// DBProgress receives the counters of one database as they grow.
type DBProgress interface {
	// SetDocsTotal gives the documents the source holds (doc_count plus
	// doc_del_count; 0: unknown), an estimate of the work: the other
	// counters count revisions, of which a document with conflicts (or
	// changed during the copy) has more than one, so they can pass it.
	SetDocsTotal(n int64)
	// AddDocsRead adds revisions read (docs_read).
	AddDocsRead(n int64)
	// AddDocsWritten adds revisions written (docs_written); a negative n
	// takes back ones counted before (refused in the end).
	AddDocsWritten(n int64)
	// AddDocWriteFailures adds revisions the target refused
	// (doc_write_failures).
	AddDocWriteFailures(n int64)
	// AddBytes adds bytes of documents and attachments written.
	AddBytes(n int64)
}

// Progress hears of each database Run starts and ends. Its methods are
// called from several goroutines at once.
type Progress interface {
	// Begin is called when a database starts; the DBProgress it returns
	// receives its counters (nil: they go nowhere).
	Begin(db string) DBProgress
	// End is called when a database is done (status failed: failed).
	End(db string, p DBProgress, failed bool)
}

// InterruptedProgress is implemented by a Progress that counts the
// databases stopped by an interruption apart: EndInterrupted is then
// called for them instead of End.
type InterruptedProgress interface {
	EndInterrupted(db string, p DBProgress)
}

// LeftOutProgress is implemented by a Progress that takes a database its
// job left out (StatusLeftOut: deleted at the source during the run) out
// of its count of databases, as Summary.Add does: EndLeftOut is then
// called for it instead of End, so that the progress's last counts
// agree with the Summary's.
type LeftOutProgress interface {
	EndLeftOut(db string, p DBProgress)
}

// Limiter is what Run reads of a host's request limiter (the sofa
// package's Limiter) to decide how many databases run at once.
type Limiter interface {
	// Name is the host's name (never with credentials).
	Name() string
	// Load returns the requests in flight, those waiting for a slot and
	// the current limit.
	Load() (inFlight, waiting, limit int)
	// Stats returns the limiter's totals and decisions (Summary.Hosts).
	Stats() limitstats.Stats
}

// NoDBProgress ignores every counter.
var NoDBProgress DBProgress = noDBProgress{}

type noDBProgress struct{}

func (noDBProgress) SetDocsTotal(int64)        {}
func (noDBProgress) AddDocsRead(int64)         {}
func (noDBProgress) AddDocsWritten(int64)      {}
func (noDBProgress) AddDocWriteFailures(int64) {}
func (noDBProgress) AddBytes(int64)            {}

// counted passes counters on and keeps their sums: a job that reports
// none in its DBResult (it stopped early) gets what it told progress.
type counted struct {
	DBProgress
	read, written, failures, bytes atomic.Int64
}

func (c *counted) AddDocsRead(n int64)    { c.read.Add(n); c.DBProgress.AddDocsRead(n) }
func (c *counted) AddDocsWritten(n int64) { c.written.Add(n); c.DBProgress.AddDocsWritten(n) }
func (c *counted) AddDocWriteFailures(n int64) {
	c.failures.Add(n)
	c.DBProgress.AddDocWriteFailures(n)
}
func (c *counted) AddBytes(n int64) { c.bytes.Add(n); c.DBProgress.AddBytes(n) }
