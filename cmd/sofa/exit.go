package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/storage"
)

// Exit codes, one table for every verb (shown in --help). exitFor is the
// only place that picks one.
const (
	exitOK          = 0   // everything copied or equal
	exitFatal       = 1   // fatal error: nothing or not all done
	exitUsage       = 2   // usage error
	exitPartial     = 3   // finished, but some documents or databases were not copied (each listed)
	exitDifferent   = 4   // verify found a difference
	exitInterrupted = 130 // interrupted (SIGINT, SIGTERM or SIGHUP); checkpoints written
)

const exitCodesHelp = `Exit codes:
  0    everything copied (or equal, for verify)
  1    fatal error: the run stopped (bad endpoint, credentials, damaged archive, lost server),
       or nothing was done: every database failed and no document was written (each is
       listed; the closing line gives the first failure)
  2    usage error (bad flags or arguments)
  3    finished, but some documents or databases were not copied (each is listed; an existing
       non-empty target database left alone is one); databases already up to date count as copied,
       and one deleted at the source during the run is left out (listed, in no count)
  4    verify found a difference
  130  interrupted (SIGINT, SIGTERM or SIGHUP): a copy or restore wrote its checkpoints (rerun to
       resume; restore --replace says what a rerun does); an interrupted backup leaves no
       archive (rerun to start over)`

// resumeMsg is what an interrupted run says unless its outcome says
// otherwise.
const resumeMsg = "interrupted: checkpoints written; run the same command again to resume"

// resumeLine is resumeMsg, or for a backup (which writes no checkpoint,
// and no archive when interrupted) what a rerun does.
func resumeLine() string {
	if c := runningCmd.Load(); c != nil && c.Name() == "backup" {
		return "interrupted: no archive was written; run the same command again to start over"
	}
	return resumeMsg
}

// arguments is "1 argument", "2 arguments" (usage errors).
func arguments(n int) string {
	if n == 1 {
		return "1 argument"
	}
	return fmt.Sprintf("%d arguments", n)
}

// usageError is a bad flag or argument.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// partialError: the verb finished, but some of its work could not be
// done (each part listed): exit 3.
type partialError struct{ err error }

func (e *partialError) Error() string { return e.err.Error() }
func (e *partialError) Unwrap() error { return e.err }

func partialErr(format string, args ...any) error {
	return &partialError{err: fmt.Errorf(format, args...)}
}

// fatalError is a failure whatever it wraps (an interruption while it
// happened included).
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

func fatal(err error) error { return &fatalError{err: err} }

// outcome is what a verb did, returned (as its error) for exitFor to
// map: the library's error and at most one of its summaries.
type outcome struct {
	err error
	// sum is a many-database run's summary; verb names its work
	// ("copied", "backed up", "restored").
	sum  *sofa.Summary
	verb string
	// res is a one-database copy's result (err is then the copy's own).
	res *replicate.Result
	// verify is a comparison's summary.
	verify *sofa.VerifySummary
	// archives is a check of archives alone.
	archives *sofa.ArchivesCheck
	// interrupted replaces resumeMsg when the run was interrupted.
	interrupted string
	// missing are the members of a set a check left out
	// (--allow-partial): the check is then partial.
	missing []string
	// closing is, under -q, the closing line the summary was printed
	// before (see printFleetSummaryOf: it may be the only line giving a
	// database's failure), "" otherwise.
	closing string
}

func (o *outcome) Error() string {
	if o.err == nil {
		return ""
	}
	return o.err.Error()
}
func (o *outcome) Unwrap() error { return o.err }

// exitFor maps what a verb returned to its exit code and the message
// main prints ("" for none); interrupted says SIGINT or SIGTERM arrived
// during the run. It is the one place that decides exit codes.
func exitFor(err error, interrupted bool) (code int, msg string) {
	o, ok := err.(*outcome)
	if !ok {
		o = &outcome{err: err}
	}
	var u *usageError
	var pe *partialError
	var f *fatalError
	var oe *sofa.OptionError
	canceled := errors.Is(o.err, context.Canceled)
	if o.err != nil {
		msg = o.err.Error()
	}
	switch {
	case o.res != nil && canceled && errors.Is(o.err, replicate.ErrFinalCheckpoint):
		return exitInterrupted, "interrupted: " + strings.TrimPrefix(msg, context.Canceled.Error()+": ") + "; run the same command again to resume from the last checkpoint written"
	case o.sum != nil && (canceled || o.sum.Interrupted) && lostCheckpoints(o.sum) > 0:
		return exitInterrupted, cmp.Or(o.interrupted, fmt.Sprintf("interrupted: the final checkpoints of %s could not be written (listed above); run the same command again to resume from the last checkpoints written", countDBs(lostCheckpoints(o.sum))))
	case o.sum != nil && (canceled || o.sum.Interrupted), o.res != nil && canceled:
		return exitInterrupted, cmp.Or(o.interrupted, resumeLine())
	case o.verify != nil && (o.verify.Interrupted || interrupted):
		return exitInterrupted, "interrupted"
	case o.err == nil:
		// the run ended: its summary decides, below
	case errors.As(o.err, &u), errors.Is(o.err, storage.ErrNotReadable), errors.Is(o.err, storage.ErrStdoutDevice):
		return exitUsage, msg
	case errors.As(o.err, &pe):
		return exitPartial, msg
	case o.res != nil, errors.As(o.err, &f):
		// a one-database copy's own error is a failure whatever it wraps
		code = exitFatal
	case errors.Is(o.err, storage.ErrIsDir), errors.Is(o.err, storage.ErrNotFile):
		return exitUsage, msg + " (--force only replaces an archive file)"
	case errors.Is(o.err, storage.ErrExist):
		return exitUsage, msg + " (use --force to overwrite it)"
	case errors.As(o.err, &oe):
		return exitUsage, msg
	case canceled:
		return exitInterrupted, cmp.Or(o.interrupted, resumeLine())
	default:
		code = exitFatal
	}
	switch {
	case code == exitOK && o.verify != nil && o.verify.DBsFailed > 0:
		code, msg = exitFatal, fmt.Sprintf("%d of %d databases could not be compared (listed above)", o.verify.DBsFailed, o.verify.DBsTotal)
	case code == exitOK && o.verify != nil && o.verify.DBsDiffer > 0:
		return exitDifferent, fmt.Sprintf("%d of %d databases differ (listed above)", o.verify.DBsDiffer, o.verify.DBsTotal)
	case code == exitOK && o.archives != nil && o.archives.Status == sofa.ArchivesDamaged:
		code, msg = exitFatal, o.archives.Worst()
	case code == exitOK && o.archives != nil && o.archives.Status == sofa.ArchivesIncomplete:
		return exitPartial, o.archives.Worst()
	case code == exitOK && len(o.missing) > 0:
		return exitPartial, fmt.Sprintf("%d of the set's members missing (--allow-partial): the databases of their shards were not checked", len(o.missing))
	case code == exitOK && o.sum != nil && o.sum.NothingDone():
		code, msg = exitFatal, nothingDone(o.sum, o.verb)
	case code == exitOK && o.sum != nil && !o.sum.Complete():
		return exitPartial, fmt.Sprintf("%d of %d databases were not %s completely (listed above)", o.sum.DBsTotal-o.sum.DBsOK, o.sum.DBsTotal, o.verb)
	case code == exitOK && o.sum != nil && len(o.sum.MissingMembers) > 0:
		return exitPartial, fmt.Sprintf("%d members of the set were missing (--allow-partial): the databases of their shards were not %s", len(o.sum.MissingMembers), o.verb)
	case code == exitOK && o.res != nil && len(o.res.Failures) > 0:
		return exitPartial, fmt.Sprintf("%d revisions were not copied (listed above)", len(o.res.Failures))
	}
	if code == exitFatal && interrupted {
		// a failure caused by the interruption: say what it was (and
		// still what the summary left to the closing line)
		if o.closing != "" {
			return exitInterrupted, o.closing + "; " + resumeLine()
		}
		return exitInterrupted, resumeLine()
	}
	return code, msg
}

// lostCheckpoints counts the databases of s interrupted before their
// final checkpoint could be written (replicate.ErrFinalCheckpoint).
func lostCheckpoints(s *sofa.Summary) int {
	n := 0
	for _, r := range s.DBs {
		if strings.Contains(r.Error, replicate.ErrFinalCheckpoint.Error()) {
			n++
		}
	}
	return n
}

// nothingDone words a run in which every database failed (fleet's
// Summary.NothingDone): how many, and the first failure, which says why
// (a target that refuses to create databases says so).
func nothingDone(s *sofa.Summary, verb string) string {
	f := s.FirstFailed()
	if s.DBsTotal == 1 {
		return fmt.Sprintf("nothing was %s: database %q failed: %s", verb, f.Name, f.Error)
	}
	return fmt.Sprintf("nothing was %s: all %d databases failed (listed above); the first, %q: %s", verb, s.DBsTotal, f.Name, f.Error)
}
