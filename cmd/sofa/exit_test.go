package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/storage"
)

// TestExitFor: every outcome a verb returns maps to the exit code and
// the message of the table in --help, in one place.
func TestExitFor(t *testing.T) {
	ok := &sofa.Summary{DBsTotal: 2, DBsOK: 2}
	shardMissing := &sofa.Summary{DBsTotal: 2, DBsOK: 2, MissingMembers: []string{"b.shard-1-of-3.sofa"}}
	part := &sofa.Summary{DBsTotal: 3, DBsOK: 1, DBsPartial: 2}
	cut := &sofa.Summary{DBsTotal: 3, DBsOK: 1, Interrupted: true}
	failed := func(name, err string) sofa.DBResult { return sofa.DBResult{Name: name, Status: "failed", Error: err} }
	none := &sofa.Summary{DBsTotal: 2, DBsFailed: 2, DBs: []sofa.DBResult{failed("a", "refused"), failed("b", "refused too")}}
	noneOfOne := &sofa.Summary{DBsTotal: 1, DBsFailed: 1, DBs: []sofa.DBResult{failed("a", "refused")}}
	wroteSome := &sofa.Summary{DBsTotal: 1, DBsFailed: 1, DocsWritten: 5, DBs: []sofa.DBResult{failed("a", "lost")}}
	someFailed := &sofa.Summary{DBsTotal: 2, DBsOK: 1, DBsFailed: 1, DBs: []sofa.DBResult{{Name: "up-to-date", Status: "ok"}, failed("b", "refused")}}
	canceled := fmt.Errorf("copy: %w", context.Canceled)
	boom := errors.New("boom")
	startOver := "interrupted: no archive was written (a backup starts over when run again)"
	chk := func(st, msg string) sofa.ArchiveCheck { return sofa.ArchiveCheck{Status: st, Error: msg} }
	archives := func(st string, checks ...sofa.ArchiveCheck) *sofa.ArchivesCheck {
		return &sofa.ArchivesCheck{Status: st, Archives: checks}
	}
	sound, inc, dmg := sofa.ArchivesSound, sofa.ArchivesIncomplete, sofa.ArchivesDamaged
	for _, c := range []struct {
		name        string
		err         error
		interrupted bool
		code        int
		msg         string
	}{
		{"nil", nil, false, exitOK, ""},
		{"nil after a signal", nil, true, exitOK, ""},
		{"usage", usageErr("bad %s", "flag"), false, exitUsage, "bad flag"},
		{"option", &sofa.OptionError{Err: boom}, false, exitUsage, (&sofa.OptionError{Err: boom}).Error()},
		{"exists", fmt.Errorf("x.sofa %w", storage.ErrExist), false, exitUsage, "x.sofa " + storage.ErrExist.Error() + " (use --force to overwrite it)"},
		{"is a dir", fmt.Errorf("x %w", storage.ErrIsDir), false, exitUsage, "x " + storage.ErrIsDir.Error() + " (--force only replaces an archive file)"},
		{"fatal", boom, false, exitFatal, "boom"},
		{"fatal option", fatal(&sofa.OptionError{Err: boom}), false, exitFatal, (&sofa.OptionError{Err: boom}).Error()},
		{"fatal during a signal", fatal(boom), true, exitInterrupted, resumeMsg},
		{"canceled", canceled, false, exitInterrupted, resumeMsg},
		{"fleet ok", &outcome{sum: ok, verb: "copied"}, false, exitOK, ""},
		{"fleet ok, a member of the set missing", &outcome{sum: shardMissing, verb: "restored"}, false, exitPartial, "1 members of the set were missing (--allow-partial): the databases of their shards were not restored"},
		{"fleet partial", &outcome{sum: part, verb: "restored"}, false, exitPartial, "2 of 3 databases were not restored completely (listed above)"},
		{"fleet nothing done", &outcome{sum: none, verb: "restored"}, false, exitFatal, `nothing was restored: all 2 databases failed (listed above); the first, "a": refused`},
		{"fleet nothing done, one db", &outcome{sum: noneOfOne, verb: "copied"}, false, exitFatal, `nothing was copied: database "a" failed: refused`},
		{"fleet all failed, documents written", &outcome{sum: wroteSome, verb: "copied"}, false, exitPartial, "1 of 1 databases were not copied completely (listed above)"},
		{"fleet one done, one failed", &outcome{sum: someFailed, verb: "restored"}, false, exitPartial, "1 of 2 databases were not restored completely (listed above)"},
		{"fleet nothing done during a signal", &outcome{sum: none, verb: "restored"}, true, exitInterrupted, resumeMsg},
		// under -q the summary left "a"'s failure to the closing line: kept
		{"fleet nothing done during a signal, -q", &outcome{sum: noneOfOne, verb: "copied", closing: `nothing was copied: database "a" failed: refused`}, true, exitInterrupted, `nothing was copied: database "a" failed: refused; ` + resumeMsg},
		{"fleet interrupted", &outcome{sum: cut, verb: "copied"}, false, exitInterrupted, resumeMsg},
		{"fleet canceled", &outcome{sum: ok, err: canceled}, false, exitInterrupted, resumeMsg},
		{"fleet interrupted, a final checkpoint lost", &outcome{sum: &sofa.Summary{DBsTotal: 2, Interrupted: true, DBs: []sofa.DBResult{
			{Name: "a", Status: "interrupted", Error: "context canceled: " + replicate.ErrFinalCheckpoint.Error() + ": 503"}, {Name: "b", Status: "ok"}}}, err: canceled}, false, exitInterrupted,
			"interrupted: the final checkpoints of 1 database could not be written (listed above); run the same command again to resume from the last checkpoints written"},
		{"servers continuous, final checkpoints lost", &outcome{err: canceled, interrupted: "interrupted: lost"}, false, exitInterrupted, "interrupted: lost"},
		{"fleet failed", &outcome{sum: ok, err: boom}, false, exitFatal, "boom"},
		{"fleet refused", &outcome{err: &sofa.OptionError{Err: boom}}, false, exitUsage, (&sofa.OptionError{Err: boom}).Error()},
		{"backup interrupted", &outcome{sum: cut, interrupted: startOver}, false, exitInterrupted, startOver},
		{"backup failed during a signal", &outcome{sum: ok, err: boom, interrupted: startOver}, true, exitInterrupted, resumeMsg},
		{"one db ok", &outcome{res: &replicate.Result{}}, false, exitOK, ""},
		{"one db failures", &outcome{res: &replicate.Result{Failures: make([]replicate.DocError, 2)}}, false, exitPartial, "2 revisions were not copied (listed above)"},
		{"one db canceled", &outcome{res: &replicate.Result{}, err: canceled}, false, exitInterrupted, resumeMsg},
		{"one db option error is fatal", &outcome{res: &replicate.Result{}, err: &sofa.OptionError{Err: boom}}, false, exitFatal, (&sofa.OptionError{Err: boom}).Error()},
		{"verify equal", &outcome{verify: &sofa.VerifySummary{DBsTotal: 2, DBsEqual: 2}}, false, exitOK, ""},
		{"verify differ", &outcome{verify: &sofa.VerifySummary{DBsTotal: 2, DBsDiffer: 1}}, false, exitDifferent, "1 of 2 databases differ (listed above)"},
		{"verify failed", &outcome{verify: &sofa.VerifySummary{DBsTotal: 2, DBsFailed: 1, DBsDiffer: 1}}, false, exitFatal, "1 of 2 databases could not be compared (listed above)"},
		{"verify interrupted", &outcome{verify: &sofa.VerifySummary{DBsTotal: 2, Interrupted: true}}, false, exitInterrupted, "interrupted"},
		{"verify signalled", &outcome{verify: &sofa.VerifySummary{DBsTotal: 2, DBsDiffer: 1}}, true, exitInterrupted, "interrupted"},
		{"archives sound", &outcome{archives: archives(sound, chk(sound, ""))}, false, exitOK, ""},
		{"archives incomplete", &outcome{archives: archives(inc, chk(sound, ""), chk(inc, "a is incomplete"), chk(inc, "b is incomplete"))}, false, exitPartial, "a is incomplete"},
		{"archives damaged", &outcome{archives: archives(dmg, chk(dmg, "x is damaged"), chk(inc, "a is incomplete"), chk(dmg, "y is damaged"))}, false, exitFatal, "y is damaged"},
		{"archives damaged during a signal", &outcome{archives: archives(dmg, chk(dmg, "x is damaged"))}, true, exitInterrupted, resumeMsg},
	} {
		code, msg := exitFor(c.err, c.interrupted)
		if code != c.code || msg != c.msg {
			t.Errorf("%s: exitFor = %d, %q; want %d, %q", c.name, code, msg, c.code, c.msg)
		}
	}
}
