package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/limit"
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

// debugf returns the engine's per-batch logger for database db under
// --debug, nil otherwise.
func (o *outputFlags) debugf(db string) func(format string, args ...any) {
	if !o.debug {
		return nil
	}
	return func(format string, args ...any) { o.logf(db+": "+format, args...) }
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

// runDBs runs job over dbs with the fleet scheduler and a progress display,
// prints the summary and maps it to an exit code (verb names the work:
// "copied", "backed up", "restored").
//
// watch, when not nil, says on "progress waiting" lines what the run waits
// on.
func runDBs(ctx context.Context, dbs []string, job fleet.Job, limiters []*limit.Limiter, watch *stallWatch, c controlFlags, out outputFlags, verb string) (fleet.Summary, error) {
	tracker := progress.NewTracker()
	tracker.SetTotal(len(dbs))
	var display *progress.Display
	if !out.quiet && !out.jsonOut {
		display = progress.Start(tracker, os.Stderr, slog.New(slog.NewTextHandler(os.Stderr, nil)), progressOptions(out.progressEvery, watch))
	}
	sum, runErr := fleet.Run(ctx, dbs, job, fleet.Options{
		Limiters: limiters, MaxDBs: c.maxDBs, Fixed: c.fixed,
		IdealDuration: c.idealDuration, Progress: tracker, Logger: out.logger(),
	})
	if display != nil {
		display.Stop()
	}
	if out.jsonOut {
		printJSON(os.Stdout, sum)
	} else if !out.quiet {
		printFleetSummary(os.Stderr, &sum)
	}
	switch {
	case sum.Interrupted || errors.Is(runErr, context.Canceled):
		return sum, &exitError{code: exitInterrupted, err: errors.New("interrupted: checkpoints written; run the same command again to resume")}
	case runErr != nil:
		return sum, fatal(runErr)
	case !sum.Complete():
		return sum, &exitError{code: exitPartial, err: fmt.Errorf("%d of %d databases were not %s completely (listed above)", sum.DBsTotal-sum.DBsOK, sum.DBsTotal, verb)}
	}
	return sum, nil
}

func registerOutput(fs *pflag.FlagSet, o *outputFlags) {
	fs.BoolVar(&o.jsonOut, "json", false, "print the result as JSON on stdout")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "print nothing but errors")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "log retries, waits and controller decisions (--debug: also every batch and checkpoint)")
	fs.BoolVar(&o.debug, "debug", false, "log every batch")
	registerProgressInterval(fs, &o.progressEvery)
}

// registerProgressInterval adds --progress-interval.
func registerProgressInterval(fs *pflag.FlagSet, d *time.Duration) {
	fs.DurationVar(d, "progress-interval", 0, "time between progress lines when stderr is not a terminal; a line is printed only when something changed, or after six intervals without change, saying what the run waits on (0: 10s, 2s when copying one database)")
}

// progressOptions are the options of a fleet run's progress display.
func progressOptions(every time.Duration, watch *stallWatch) progress.Options {
	o := progress.Options{Interval: every}
	if watch != nil {
		o.Waiting = watch.waiting
	}
	return o
}
