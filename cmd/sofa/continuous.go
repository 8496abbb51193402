package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/metrics"
	"github.com/sofadb/sofa/replicate"
)

// continuousFlags are replicate's flags of a continuous run.
type continuousFlags struct {
	continuous    bool
	flushInterval time.Duration
	metricsAddr   string
	pollInterval  time.Duration
	securityEvery time.Duration
	deleteMissing bool
}

func (c *continuousFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&c.continuous, "continuous", false, "keep replicating as writes arrive until SIGINT/SIGTERM (exit 130 after the final checkpoints); server mode: one catch-up of every database, then only the databases the source's _db_updates feed says changed (without it, such as PouchDB Server: polled every --poll-interval)")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "continuous: serve Prometheus metrics on host:port/metrics and a JSON status on /status (e.g. 127.0.0.1:9464)")
	fs.DurationVar(&c.pollInterval, "poll-interval", sofa.DefaultPollInterval, "continuous server mode: time between listings of a source without _db_updates (_all_dbs and each database's update_seq)")
	fs.DurationVar(&c.securityEvery, "security-interval", sofa.DefaultSecurityInterval, "continuous: time between two reads of _security and _revs_limit at the source, a change written to the target (CouchDB announces their changes in no feed): server mode, of each copied database (two GETs each); database mode, _security and _revs_limit where they are copied (--create-target, --copy-security); negative: never")
	fs.BoolVar(&c.deleteMissing, "delete-missing", false, "continuous server mode: delete the target's copy of a database deleted on the source (also while sofa was stopped: a target database holding this source's checkpoint), or deleted and created again there (then the new one is copied afresh; default: report it and keep the copy)")
}

// runServersContinuous keeps the target server a copy of the source
// until the context ends (SIGINT/SIGTERM: exit 130 once the running
// copies have written their checkpoints).
func (rc *replicateCmd) runServersContinuous(ctx context.Context, src, tgt *sofa.Endpoint) error {
	out := outputFlags{jsonOut: rc.jsonOut, quiet: rc.quiet, verbose: rc.verbose, debug: rc.debug, progressEvery: rc.progressEvery}
	rc.engine.setMemoryLimit(int64(rc.control.maxDBs) << 20)
	m := metrics.New()
	if rc.cont.metricsAddr != "" {
		addr, err := m.Serve(ctx, rc.cont.metricsAddr)
		if err != nil {
			return usageErr("--metrics-addr %s: %w", rc.cont.metricsAddr, err)
		}
		if !rc.quiet {
			fmt.Fprintf(os.Stderr, "sofa: metrics on http://%s/metrics, status on http://%s/status\n", addr, addr)
		}
	}
	// A continuous run's log is its output: lines are printed unless -q.
	logf := func(format string, args ...any) {
		if !rc.quiet {
			fmt.Fprintf(os.Stderr, "sofa: %s "+format+"\n", append([]any{time.Now().Format(time.RFC3339)}, args...)...)
		}
	}
	shard, err := rc.shard.shard()
	if err != nil {
		return err
	}
	prog := out.progress()
	prog.phase = "initial_copy" // its lines end with it
	var stopProg sync.Once
	follow := newFollowLog(rc.progressEvery, logf)
	if prog.show {
		fctx, stopFollow := context.WithCancel(ctx)
		defer stopFollow()
		go follow.run(fctx)
	}
	sum, err := sofa.Sync(ctx, src, tgt, sofa.SyncOptions{
		Copy: sofa.CopyOptions{
			Engine:        rc.engine.options(),
			Selection:     sofa.Selection{Include: usersIncluded(rc.include, rc.withUsers), Exclude: rc.exclude, Skip: sofa.WithoutUsers(sofa.ReplicateSkip, rc.withUsers), Shard: shard},
			ReuseExisting: rc.reuseExisting, Q: rc.q, N: rc.n,
			Verify:            sofa.VerifyMode(rc.verifyMode),
			SourceCheckpoints: rc.checkpoints == checkpointsBoth,
			RunControl: func() sofa.RunControl {
				c := rc.control.runControl(&out, prog)
				c.Logf = logf
				return c
			}(),
		},
		PollInterval:     rc.cont.pollInterval,
		SecurityInterval: rc.cont.securityEvery,
		DeleteMissing:    rc.cont.deleteMissing,
		Metrics:          m,
		Event: func(e sofa.SyncEvent) {
			if e.Kind == sofa.EventCaughtUp {
				stopProg.Do(prog.Stop)
			}
			follow.event(e)
		},
	})
	stopProg.Do(prog.Stop)
	var o error = err // an interruption says resumeMsg
	if sum != nil && sum.FinalCheckpointsLost > 0 && errors.Is(err, context.Canceled) {
		o = &outcome{err: err, interrupted: fmt.Sprintf("interrupted: the final checkpoints of %s could not be written; run the same command again to resume from the last checkpoints written", countDBs(sum.FinalCheckpointsLost))}
	}
	if sum != nil {
		if rc.jsonOut {
			// the document every --json run prints: status and exit
			// code beside the summary
			code, msg := exitFor(o, ctx.Err() != nil)
			doc := syncDoc{SyncSummary: sum, Status: runStatus(code), ExitCode: code}
			if code != exitOK {
				doc.Error = msg
			}
			printJSON(os.Stdout, doc)
		} else if !rc.quiet {
			if sum.CatchUp != nil {
				printFleetSummaryOf(os.Stderr, withoutWarnings(sum.CatchUp), false, "initial copy", "")
			}
			// the catch-ups' counts, the initial copy's being above
			fmt.Fprintf(os.Stderr, "sofa: continuous (%s) for %s: %s after the initial copy (%d failed), docs_written=%d doc_write_failures=%d, _security updates %d, _revs_limit updates %d; created %v, deleted on the source %v (deleted on the target %v)\n",
				sum.Mode, time.Duration(sum.Duration).Round(time.Second), catchUpCopies(sum.Runs), sum.RunsFailed, sum.DocsWritten, sum.DocWriteFailures, sum.SecurityUpdates, sum.RevsLimitUpdates,
				eventNames(sum.Created), eventNames(sum.Deleted), eventNames(sum.DeletedOnTarget))
			for db, e := range sum.Failing {
				fmt.Fprintf(os.Stderr, "sofa: database %q: last copy failed: %s\n", db, e)
			}
		}
	}
	return o
}

// syncDoc is a continuous whole-server run's --json document.
type syncDoc struct {
	*sofa.SyncSummary
	Status   string `json:"status"`
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exit_code"`
}

// withoutWarnings is the catch-up's summary without the databases'
// warnings: a continuous run printed each as it came (Logf, "db: ..."),
// and the summary at its end would say it a second time.
func withoutWarnings(s *fleet.Summary) *fleet.Summary {
	c := *s
	c.DBs = slices.Clone(s.DBs)
	for i := range c.DBs {
		c.DBs[i].Warnings = nil
	}
	return &c
}

// serveDBMetrics serves --metrics-addr for a continuous copy of one
// database and returns the observer that feeds it (metrics labelled with
// the source database's name).
func (rc *replicateCmd) serveDBMetrics(ctx context.Context, name string) (replicate.Observer, error) {
	m := metrics.New()
	addr, err := m.Serve(ctx, rc.cont.metricsAddr)
	if err != nil {
		return nil, usageErr("--metrics-addr %s: %w", rc.cont.metricsAddr, err)
	}
	if !rc.quiet {
		fmt.Fprintf(os.Stderr, "sofa: metrics on http://%s/metrics, status on http://%s/status\n", addr, addr)
	}
	return m.OneDB(name), nil
}

// eventNames prints the databases of a list of events once each, in the
// order first seen, with the count of a repeated one ("[a b (x3)]"): a
// database deleted and created again many times is one name, not dozens.
func eventNames(events []string) string {
	count := map[string]int{}
	var order []string
	for _, n := range events {
		if count[n] == 0 {
			order = append(order, n)
		}
		count[n]++
	}
	parts := make([]string, len(order))
	for i, n := range order {
		parts[i] = n
		if c := count[n]; c > 1 {
			parts[i] = fmt.Sprintf("%s (x%d)", n, c)
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}
