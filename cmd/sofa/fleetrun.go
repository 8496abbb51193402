package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/progress"
)

// outputFlags are the flags every copying verb shares for what it prints.
type outputFlags struct {
	jsonOut       bool
	quiet         bool
	verbose       bool
	debug         bool
	progressEvery time.Duration
}

func (o *outputFlags) logf(format string, args ...any) {
	if o.verbose || o.debug {
		fmt.Fprintf(os.Stderr, "sofa: "+format+"\n", args...)
	}
}

// debugLogf is the engine's per-batch logger under --debug, nil otherwise.
func (o *outputFlags) debugLogf() func(format string, args ...any) {
	if !o.debug {
		return nil
	}
	return o.logf
}

func (o *outputFlags) logger() *slog.Logger {
	if !o.verbose && !o.debug {
		return nil
	}
	lvl := slog.LevelInfo
	if o.debug {
		lvl = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}

// progress is the progress of a many-database run for out: a display on
// stderr (bars on a terminal, lines otherwise) unless --quiet or --json.
// Stop it once the run returns.
func (o *outputFlags) progress() *displayProgress {
	return &displayProgress{t: progress.NewTracker(), show: !o.quiet && (!o.jsonOut || o.progressEvery > 0), every: o.progressEvery}
}

// displayProgress is a sofa.Progress over the progress tracker and its
// display.
type displayProgress struct {
	t     *progress.Tracker
	d     *progress.Display
	show  bool
	every time.Duration
	// phase, when set, names the part of the run shown (phase=...
	// on every total line): "initial_copy" in a continuous run.
	phase string
}

func (p *displayProgress) Start(dbs int, waiting func(stalled bool) string) {
	p.t.SetTotal(dbs)
	if p.show {
		o := progress.Options{Interval: p.every, Waiting: waiting}
		if p.phase != "" {
			o.Extra = func() []slog.Attr { return []slog.Attr{slog.String("phase", p.phase)} }
		}
		p.d = progress.Start(p.t, os.Stderr, slog.New(slog.NewTextHandler(os.Stderr, nil)), o)
	}
}

func (p *displayProgress) Begin(db string) sofa.DBProgress { return p.t.Begin(db) }

func (p *displayProgress) End(db string, d sofa.DBProgress, failed bool) {
	pd, _ := d.(*progress.DB)
	p.t.End(pd, failed)
}

func (p *displayProgress) EndInterrupted(db string, d sofa.DBProgress) {
	pd, _ := d.(*progress.DB)
	p.t.EndInterrupted(pd)
}

// EndLeftOut takes a database left out during the run (deleted at the
// source) out of the count, as the summary does.
func (p *displayProgress) EndLeftOut(db string, d sofa.DBProgress) {
	pd, _ := d.(*progress.DB)
	p.t.EndLeftOut(pd)
}

// Stop stops the display (no-op when none was started).
func (p *displayProgress) Stop() {
	if p.d != nil {
		p.d.Stop()
	}
}

// finishDBs prints the summary of a many-database run (when it has one)
// and returns its outcome (verb names the work: "copied", "backed up";
// interrupted is what an interruption says, "" for resumeMsg).
func finishDBs(sum *sofa.Summary, err error, out outputFlags, verb, interrupted string) *outcome {
	return finishDBsInto(sum, err, out, verb, interrupted, nil)
}

// finishDBsInto is finishDBs for a run that wrote the archive arch (nil:
// none written), named in its --json document.
func finishDBsInto(sum *sofa.Summary, err error, out outputFlags, verb, interrupted string, arch *archiveDoc) *outcome {
	o := &outcome{sum: sum, err: err, verb: verb, interrupted: interrupted}
	if sum != nil {
		if out.jsonOut {
			code, msg := exitFor(o, false)
			doc := summaryDoc{Summary: sum, Status: runStatus(code), ExitCode: code, Archive: arch}
			if err != nil && code != exitOK {
				// stopped by an error: said as a failureDoc says it
				doc.Error = msg
			}
			printJSON(os.Stdout, doc)
		} else {
			closing := ""
			if out.quiet {
				_, closing = exitFor(o, false)
				o.closing = closing
			}
			printFleetSummaryOf(os.Stderr, sum, out.quiet, "", closing)
		}
	}
	return o
}

// summaryDoc is a many-database run's --json document: its summary, its
// status (runStatus) and the process's exit code; a run stopped by an
// error (a damaged archive, a lost server, an interrupt) adds Error as
// failureDoc has it.
type summaryDoc struct {
	*sofa.Summary
	Status   string      `json:"status"`
	Error    string      `json:"error,omitempty"`
	ExitCode int         `json:"exit_code"`
	Archive  *archiveDoc `json:"archive,omitempty"`
}

// archiveDoc is the archive a backup wrote, in its --json document: its
// location (without credentials) and size in bytes.
type archiveDoc struct {
	Location string `json:"location"`
	Bytes    int64  `json:"bytes"`
}

func registerOutput(fs *pflag.FlagSet, o *outputFlags) {
	fs.BoolVar(&o.jsonOut, "json", false, "print the result as JSON on stdout (a run stopped by an error prints {status, error, exit_code}); no progress lines on stderr unless --progress-interval is given")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "print nothing but errors")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "log retries, waits and controller decisions (--debug: also every batch and checkpoint)")
	fs.BoolVar(&o.debug, "debug", false, "log every batch")
	registerProgressInterval(fs, &o.progressEvery)
}

// registerProgressInterval adds --progress-interval.
func registerProgressInterval(fs *pflag.FlagSet, d *time.Duration) {
	fs.DurationVar(d, "progress-interval", 0, "time between progress lines when stderr is not a terminal; a line is printed only when something changed, or after six intervals without change, saying what the run waits on (0: 10s, 2s when copying one database)")
}
