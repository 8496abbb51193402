package fleet

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/sofadb/sofa/limitstats"
	"github.com/sofadb/sofa/replicate"
)

// Status is the outcome of one database.
type Status string

const (
	// StatusOK: every document copied.
	StatusOK Status = "ok"
	// StatusPartial: the job finished but some documents were not copied
	// (doc_write_failures or Failures).
	StatusPartial Status = "partial"
	// StatusFailed: the job returned an error.
	StatusFailed Status = "failed"
	// StatusInterrupted: the run was cancelled while the job ran; its last
	// checkpoint is the job's business.
	StatusInterrupted Status = "interrupted"
	// StatusNotStarted: the run was cancelled before the job started.
	StatusNotStarted Status = "not_started"
	// StatusLeftOut: the job found the database is not the run's to copy
	// after all (a *LeftOutError: deleted at the source during the run).
	// Summary.Add lists it in LeftOut, not in DBs or any count of
	// databases.
	StatusLeftOut Status = "left_out"
	// StatusNotWritten: a backup read the database whole, but the run
	// stopped (interrupted) before its archive was written: nothing of
	// it was kept (Summary.ArchiveNotWritten).
	StatusNotWritten Status = "not_written"
)

// LeftOutError, returned (wrapped or not) by a job, leaves its database
// out of the run (StatusLeftOut) with Reason: it is not a failure.
type LeftOutError struct {
	Reason string
	Err    error // what showed it, for errors.Is
}

func (e *LeftOutError) Error() string { return e.Reason }
func (e *LeftOutError) Unwrap() error { return e.Err }

// Duration is a time.Duration that marshals to JSON as seconds.
type Duration time.Duration

// MarshalJSON writes seconds with millisecond precision.
func (d Duration) MarshalJSON() ([]byte, error) {
	// whole milliseconds divided once: Seconds() adds two parts and
	// printed 1.1219999999999999 for 1.122 s
	ms := time.Duration(d).Round(time.Millisecond).Milliseconds()
	return strconv.AppendFloat(nil, float64(ms)/1000, 'f', -1, 64), nil
}

// UnmarshalJSON reads seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s float64
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*d = Duration(s * float64(time.Second))
	return nil
}

// DBResult is the outcome of one database, as a Job reports it and Run
// completes it (Name, Duration, Status, Error).
type DBResult struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Counters, named as CouchDB's replication stats.
	DocsRead         int64 `json:"docs_read"`
	DocsWritten      int64 `json:"docs_written"`
	DocWriteFailures int64 `json:"doc_write_failures"`
	MissingChecked   int64 `json:"missing_checked"`
	MissingFound     int64 `json:"missing_found"`
	// Bytes is the payload moved (bodies and attachments).
	Bytes    int64    `json:"bytes"`
	Duration Duration `json:"duration_s"`
	// Error is the job's error, "" when none. Never holds credentials: it
	// comes from errors that must not carry them.
	Error string `json:"error,omitempty"`
	// Failures names each revision not copied, and why.
	Failures []replicate.DocError `json:"failures,omitempty"`
	// Warnings are what the job noticed that did not stop it, e.g. a
	// source database recreated since the last checkpoint, or a target
	// holding documents the source does not.
	Warnings []string `json:"warnings,omitempty"`
}

// Summary is the result of Run, ready for encoding/json.
type Summary struct {
	Started  time.Time `json:"started"`
	Duration Duration  `json:"duration_s"`
	// Interrupted is true when the run was cancelled before every database
	// finished.
	Interrupted bool `json:"interrupted"`
	// Counts of databases by status, and totals over all of them.
	DBsTotal       int `json:"dbs_total"`
	DBsOK          int `json:"dbs_ok"`
	DBsPartial     int `json:"dbs_partial"`
	DBsFailed      int `json:"dbs_failed"`
	DBsInterrupted int `json:"dbs_interrupted"`
	DBsNotStarted  int `json:"dbs_not_started"`
	// DBsNotWritten counts the databases a backup read whole before it
	// stopped without writing its archive (StatusNotWritten).
	DBsNotWritten int `json:"dbs_not_written,omitempty"`
	// ArchiveNotWritten is true for a backup that stopped (interrupted)
	// before its archive was written: no database was backed up (none
	// is ok, DocsWritten is 0); DocsRead and Bytes say what was read.
	ArchiveNotWritten bool `json:"archive_not_written,omitempty"`
	// TotalUnknown is true when the run stopped before it could learn
	// every database of its source (an archive read in order, stopped by
	// damage before its manifest): the counts hold the databases it
	// reached, and the source may hold others that no count includes.
	TotalUnknown     bool  `json:"dbs_total_unknown,omitempty"`
	DocsRead         int64 `json:"docs_read"`
	DocsWritten      int64 `json:"docs_written"`
	DocWriteFailures int64 `json:"doc_write_failures"`
	MissingChecked   int64 `json:"missing_checked"`
	MissingFound     int64 `json:"missing_found"`
	Bytes            int64 `json:"bytes"`
	// DBs holds one result per database, in the order given to Run.
	DBs []DBResult `json:"dbs"`
	// LeftOut names the databases of the source that a default rule left
	// out, which the caller's selection did not name (a restore's
	// _replicator; the system databases of ReplicateSkip and BackupSkip
	// a whole-server copy or backup left out), or that a job left out (StatusLeftOut: deleted at the
	// source during the run; in a restore of a chain, absent from its
	// last archive); they are not among DBs and not counted. Nil when
	// none or when the caller does not report them.
	LeftOut []LeftOut `json:"left_out,omitempty"`
	// DeletedSincePrevious names, sorted, the databases of the previous
	// archive an incremental backup continues that the source no longer
	// holds (deleted since): the new archive does not hold them, so a
	// restore of the chain leaves them out (restoring the archives up to
	// the previous one gets them back). They are in no count. Nil when
	// none (and for every other run).
	DeletedSincePrevious []string `json:"deleted_since_previous,omitempty"`
	// MissingMembers names the members of a sharded backup's set that
	// were missing from a run that accepted them (restore
	// --allow-partial): the databases of their shards were not restored
	// and are in no count. Nil when none.
	MissingMembers []string `json:"missing_members,omitempty"`
	// Replaced names the target databases a restore with --replace
	// deleted (and created again) before restoring into them, with what
	// each held when it was deleted; each is also among DBs, whose status
	// says whether its restore was completed. Nil when none.
	Replaced []Replaced `json:"replaced,omitempty"`
	// Warnings are the run's own warnings (not one database's), such as
	// a source and a target that report one server uuid. Nil when none.
	Warnings []string `json:"warnings,omitempty"`
	// Hosts holds each limiter's totals and decisions.
	Hosts []limitstats.Stats `json:"hosts,omitempty"`
	// Concurrency tells how many databases ran at once and why.
	Concurrency Concurrency `json:"concurrency"`
	// RequestsByKind holds, per endpoint ("source", "target"), the HTTP
	// attempts sent by kind, e.g. {"target": {"PUT /db": 1000}} (see
	// couch.Counters.Kinds). Set by the caller; nil when unknown.
	RequestsByKind map[string]map[string]int64 `json:"requests_by_kind,omitempty"`
}

// Replaced is a target database a restore deleted to restore the
// archive's copy into it (RestoreOptions.Replace), and what it held then
// (GET /db just before the DELETE).
type Replaced struct {
	Name string `json:"name"`
	// DocCount is doc_count: live documents.
	DocCount int64 `json:"doc_count"`
	// DocDelCount is doc_del_count: deleted documents (tombstones); nil
	// when the server does not report it (PouchDB Server).
	DocDelCount *int64 `json:"doc_del_count,omitempty"`
}

// LeftOut is a database a default rule left out of a run, and why.
type LeftOut struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// NotWritten marks s as the summary of a backup whose archive was not
// written (ArchiveNotWritten): every database read whole becomes
// StatusNotWritten, and no document counts as written (DocsWritten 0,
// per database and in total); what was read stays counted.
func (s *Summary) NotWritten() {
	s.ArchiveNotWritten = true
	s.DocsWritten, s.DBsOK, s.DBsPartial = 0, 0, 0
	for i := range s.DBs {
		r := &s.DBs[i]
		r.DocsWritten = 0
		if r.Status == StatusOK || r.Status == StatusPartial {
			r.Status = StatusNotWritten
			s.DBsNotWritten++
		}
	}
}

// Complete reports whether every database finished with status ok.
func (s *Summary) Complete() bool { return s.DBsOK == s.DBsTotal }

// NothingDone reports a run that did nothing: it had databases, every
// one failed (none ok, partial, interrupted or not started) and no
// document was written. A database skipped on purpose or already up to
// date is ok, so it is something done; so is a document written by a
// database that failed after it. Such a run is a failure as a whole (the
// sofa command exits 1, not 3); FirstFailed says why.
func (s *Summary) NothingDone() bool {
	return s.DBsTotal > 0 && s.DBsFailed == s.DBsTotal && s.DocsWritten == 0
}

// FirstFailed returns the first failed database's result in DBs' order
// (nil: none failed).
func (s *Summary) FirstFailed() *DBResult {
	for i := range s.DBs {
		if s.DBs[i].Status == StatusFailed {
			return &s.DBs[i]
		}
	}
	return nil
}

// Concurrency describes the databases-in-flight side of a run.
type Concurrency struct {
	// Max is --max-dbs; Peak the most databases that ran at once.
	Max  int `json:"max"`
	Peak int `json:"peak"`
	// Fixed is true when the target was Max throughout (--fixed).
	Fixed bool `json:"fixed,omitempty"`
	// Changes lists changes of the target number of databases in flight,
	// the last 256 kept; ChangesDropped counts older ones.
	Changes        []TargetChange `json:"changes,omitempty"`
	ChangesDropped int            `json:"changes_dropped,omitempty"`
}

// TargetChange is one change of the number of databases allowed in flight.
type TargetChange struct {
	Time time.Time `json:"time"`
	From int       `json:"from"`
	To   int       `json:"to"`
	// Detail gives the numbers behind it, e.g.
	// "host a:5984 limit 24, 3.1 requests per db".
	Detail string `json:"detail"`
}

// Merge folds o, another part of the same database's work (e.g. the
// next archive of a restore chain), into r: counters and durations
// summed, failures and warnings kept, the last error and the worse
// status (failed > interrupted > not_started > partial > ok).
func (r *DBResult) Merge(o DBResult) {
	r.DocsRead += o.DocsRead
	r.DocsWritten += o.DocsWritten
	r.DocWriteFailures += o.DocWriteFailures
	r.MissingChecked += o.MissingChecked
	r.MissingFound += o.MissingFound
	r.Bytes += o.Bytes
	r.Duration += o.Duration
	r.Failures = append(r.Failures, o.Failures...)
	r.Warnings = append(r.Warnings, o.Warnings...)
	if o.Error != "" {
		r.Error = o.Error
	}
	if statusRank[o.Status] > statusRank[r.Status] {
		r.Status = o.Status
	}
}

var statusRank = map[Status]int{StatusOK: 0, StatusPartial: 1, StatusNotWritten: 2, StatusNotStarted: 2, StatusInterrupted: 3, StatusFailed: 4}

// Add counts r, whose Status is set, into the summary's totals and list.
func (s *Summary) Add(r DBResult) {
	if r.Status == StatusLeftOut {
		s.LeftOut = append(s.LeftOut, LeftOut{Name: r.Name, Reason: r.Error})
		s.DocsRead += r.DocsRead
		s.DocsWritten += r.DocsWritten
		s.Bytes += r.Bytes
		return
	}
	s.DBs = append(s.DBs, r)
	s.DBsTotal++
	switch r.Status {
	case StatusOK:
		s.DBsOK++
	case StatusPartial:
		s.DBsPartial++
	case StatusFailed:
		s.DBsFailed++
	case StatusInterrupted:
		s.DBsInterrupted++
	case StatusNotStarted:
		s.DBsNotStarted++
	case StatusNotWritten:
		s.DBsNotWritten++
	}
	s.DocsRead += r.DocsRead
	s.DocsWritten += r.DocsWritten
	s.DocWriteFailures += r.DocWriteFailures
	s.MissingChecked += r.MissingChecked
	s.MissingFound += r.MissingFound
	s.Bytes += r.Bytes
}
