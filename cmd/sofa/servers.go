package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/fleet"
)

// runServers replicates every selected database of a server (whole-server
// mode) under the adaptive concurrency controller.
func (rc *replicateCmd) runServers(ctx context.Context, src, tgt *sofa.Endpoint) error {
	out := outputFlags{jsonOut: rc.jsonOut, quiet: rc.quiet, verbose: rc.verbose, debug: rc.debug, progressEvery: rc.progressEvery}
	// One memory budget for all databases in flight.
	rc.engine.setMemoryLimit(int64(rc.control.maxDBs) << 20)
	shard, err := rc.shard.shard()
	if err != nil {
		return err
	}
	prog := out.progress()
	sum, err := sofa.Copy(ctx, src, tgt, sofa.CopyOptions{
		Engine:        rc.engine.options(),
		Selection:     sofa.Selection{Include: usersIncluded(rc.include, rc.withUsers), Exclude: rc.exclude, Skip: sofa.WithoutUsers(sofa.ReplicateSkip, rc.withUsers), Shard: shard},
		ReuseExisting: rc.reuseExisting, Q: rc.q, N: rc.n,
		Verify:            sofa.VerifyMode(rc.verifyMode),
		SourceCheckpoints: rc.checkpoints == checkpointsBoth,
		RunControl:        rc.control.runControl(&out, prog),
	})
	prog.Stop()
	return finishDBs(sum, err, out, "copied", "")
}

// printFleetSummary prints a many-database run's closing line and every
// database that was not plainly ok, with its revisions not copied and its
// warnings. quiet (-q) leaves out the closing line and the databases that
// are ok with warnings: what is left are errors.
func printFleetSummary(w *os.File, s *fleet.Summary, quiet bool) {
	printFleetSummaryOf(w, s, quiet, "", "")
}

// printFleetSummaryOf is printFleetSummary for a part of a run named by
// of ("initial copy": a continuous run's), which starts its closing line
// and the lines of its databases. closing is the line the run ends with
// (exitFor's): under quiet, a failed database whose name and error it
// gives, and that has nothing listed under it, is left to it (-q printed
// such a failure twice, one line after the other).
func printFleetSummaryOf(w *os.File, s *fleet.Summary, quiet bool, of, closing string) {
	head := "sofa: "
	if of != "" {
		head += of + ": "
	}
	if !quiet && s.ArchiveNotWritten {
		// no archive: nothing was backed up, whatever was read
		fmt.Fprintf(w, head+"no archive written: %s in %.1fs, none kept: %d read whole, %d interrupted, %d failed, %d not started; docs_read=%d bytes=%d (%s) read; docs_written=0\n",
			countDBs(s.DBsTotal), time.Duration(s.Duration).Seconds(), s.DBsNotWritten, s.DBsInterrupted, s.DBsFailed, s.DBsNotStarted,
			s.DocsRead, s.Bytes, humanBytes(s.Bytes))
	} else if !quiet {
		unknown := ""
		if s.TotalUnknown {
			unknown = " (of an unknown number: the read stopped before the archive's manifest)"
		}
		fmt.Fprintf(w, head+"%s%s in %.1fs: %d ok, %d partial, %d failed, %d interrupted, %d not started; docs_read=%d docs_written=%d doc_write_failures=%d bytes=%d (%s)\n",
			countDBs(s.DBsTotal), unknown, time.Duration(s.Duration).Seconds(), s.DBsOK, s.DBsPartial, s.DBsFailed, s.DBsInterrupted, s.DBsNotStarted,
			s.DocsRead, s.DocsWritten, s.DocWriteFailures, s.Bytes, humanBytes(s.Bytes))
	}
	if !quiet {
		for _, l := range s.LeftOut {
			fmt.Fprintf(w, "sofa: database %q left out: %s\n", l.Name, l.Reason)
		}
	}
	for _, m := range s.Warnings {
		fmt.Fprintf(w, "sofa: warning: %s\n", m)
	}
	for _, d := range s.DBs {
		if d.Status == fleet.StatusOK && (quiet || len(d.Warnings) == 0) {
			continue
		}
		if d.Status == fleet.StatusNotWritten || d.Status == fleet.StatusNotStarted && d.Error == "" {
			// counted in the line above; an interrupt of a run over
			// thousands of databases listed each (1,874 lines)
			continue
		}
		if quiet && saysFailure(closing, d) {
			continue
		}
		fmt.Fprintf(w, head+"database %q: %s", d.Name, d.Status)
		if d.Status == fleet.StatusOK {
			fmt.Fprintf(w, " with warnings")
		}
		if d.Error != "" {
			fmt.Fprintf(w, ": %s", d.Error)
		}
		fmt.Fprintln(w)
		for _, f := range d.Failures {
			fmt.Fprintf(w, "sofa:   not copied: %s\n", failureLine(f))
		}
		for _, m := range d.Warnings {
			fmt.Fprintf(w, "sofa:   warning: %s\n", m)
		}
	}
}

// saysFailure reports whether the line closing gives d's failure whole,
// its name and its error as exitFor words them ('database "a" failed:
// E', 'the first, "a": E', a lost server's 'a: E'), for a failed
// database with no revision or warning listed under it.
func saysFailure(closing string, d fleet.DBResult) bool {
	if d.Status != fleet.StatusFailed || d.Error == "" || len(d.Failures) > 0 || len(d.Warnings) > 0 {
		return false
	}
	for _, f := range []string{"%q failed: %s", "%q: %s", "%s: %s"} {
		if strings.Contains(closing, fmt.Sprintf(f, d.Name, d.Error)) {
			return true
		}
	}
	return false
}

// countDBs is "1 database" or "N databases".
func countDBs(n int) string {
	if n == 1 {
		return "1 database"
	}
	return fmt.Sprintf("%d databases", n)
}
