package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/internal/progress"
	"github.com/sofadb/sofa/replicate"
)

type replicateCmd struct {
	engine       engineFlags
	client       clientFlags
	createTarget bool
	copySecurity bool
	jsonOut      bool
	quiet        bool
	verbose      bool
	debug        bool
	// progressEvery is --progress-interval; watch tells what the run waits
	// on when its progress stands still.
	progressEvery time.Duration
	watch         *sofa.StallWatch
	// whole-server mode
	control       controlFlags
	include       []string
	exclude       []string
	shard         shardFlag
	withUsers     bool
	reuseExisting bool
	q, n          int
	verifyMode    string
	// serverFlags are the whole-server flags given (serverModeFlags):
	// a run of two databases refuses them.
	serverFlags []string
	checkpoints string
	cont        continuousFlags
	// counters are the HTTP clients' counters of a one-database run,
	// summed into the summary.
	counters []*couch.Counters
}

func newReplicateCmd() *cobra.Command {
	rc := &replicateCmd{}
	cmd := &cobra.Command{
		Use:   "replicate SOURCE TARGET",
		Short: "Copy a database (or every database of a server) to another",
		Long: `Copy every leaf revision (conflicts and tombstones included) with its
history and attachments from SOURCE to TARGET over the CouchDB replication
protocol. SOURCE and TARGET are both database URLs (http://host:5984/db), or
both server URLs (http://host:5984): then every database is copied, many at
once under an adaptive concurrency controller that grows while the servers
keep up and backs off on 429, 503, timeouts and rising latency. New target
databases get the source's properties, _revs_limit (before documents) and
_security (after them). _replicator and _global_changes are skipped, and
_users unless --with-users.

Progress is checkpointed in _local/<replication id> on the target database
(--checkpoints both: on the source too, as CouchDB's replicator does; the
default needs read access only on the source), so an interrupted or killed
run resumes where it stopped; a second run after a success copies nothing.

With --continuous and database URLs, the run does not end
after the copy: it follows the source's changes feed (feed=continuous,
with heartbeats) and copies writes as they arrive, in batches sent when
they reach --batch-size rows, --write-batch-bytes, or --flush-interval
after their first change. It reconnects with backoff whenever the feed
or the target fails ("feed lost: ...; reconnecting in 2s"), says when the
target stops answering and answers again ("target lost: ...", "target
back after 6.2s"), when it falls behind and when it has caught up, and checkpoints every
--checkpoint-interval. SIGINT or SIGTERM stops it: a final checkpoint is
written and it exits 130; the same command resumes from there.

--continuous with server URLs keeps the target a copy until SIGINT or
SIGTERM (exit 130 once the running copies have written their checkpoints):
every database is copied once, then only the databases that change are
copied again, incrementally. A CouchDB source is watched through one
_db_updates feed (it needs the _global_changes database); a source without
it (PouchDB Server) is listed every --poll-interval. New databases are
copied, deleted ones reported and kept on the target (--delete-missing
deletes them). --metrics-addr serves Prometheus metrics (/metrics) and a
JSON status (/status).

` + exitCodesHelp,
		Example: `  sofa replicate http://admin:pw@old:5984/orders http://admin:pw@new:5984/orders --create-target
  SOFA_SOURCE_PASSWORD=pw sofa replicate http://admin@old:5984/a http://new:5984/a --json
  sofa replicate --continuous --flush-interval 100ms http://admin:pw@primary:5984/orders http://admin:pw@standby:5984/orders
  sofa replicate --continuous --metrics-addr 127.0.0.1:9464 http://admin:pw@old:5984 http://admin:pw@new:5984
  sofa replicate http://admin:pw@old:5984 http://admin:pw@new:5984 --shard 2/8   # worker 2 of 8`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageErr("replicate needs SOURCE and TARGET URLs (got %s)", arguments(len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// continuous flags on the command line (a configuration
			// file or the environment may hold them for the continuous
			// runs it serves too)
			var given []string
			for _, f := range continuousFlagNames {
				if cmd.Flags().Changed(f) {
					given = append(given, f)
				}
			}
			if err := configure(cmd, &rc.engine); err != nil {
				return err
			}
			if len(given) > 0 && !rc.cont.continuous {
				return usageErr("--%s applies to a continuous run only: give --continuous too", given[0])
			}
			for _, f := range serverModeFlags {
				if cmd.Flags().Changed(f) {
					rc.serverFlags = append(rc.serverFlags, "--"+f)
				}
			}
			return rc.run(cmd.Context(), args[0], args[1])
		},
	}
	fs := cmd.Flags()
	rc.engine.register(fs)
	rc.client.register(fs, "source", "target")
	fs.BoolVar(&rc.createTarget, "create-target", false, "create the target database if missing, with the source's properties, _revs_limit and _security")
	fs.BoolVar(&rc.copySecurity, "copy-security", false, "copy _revs_limit (before documents) and _security (after) to an existing target")
	fs.BoolVar(&rc.jsonOut, "json", false, "print the result as JSON on stdout (a run stopped by an error prints {status, error, exit_code}); no progress lines on stderr unless --progress-interval is given")
	fs.BoolVarP(&rc.quiet, "quiet", "q", false, "print nothing but errors")
	fs.BoolVarP(&rc.verbose, "verbose", "v", false, "log retries, waits and controller decisions (--debug: also every batch and checkpoint)")
	fs.BoolVar(&rc.debug, "debug", false, "log every batch")
	registerProgressInterval(fs, &rc.progressEvery)
	fs.String("config", "", "TOML file of flag values (keys are flag names)")
	rc.control.register(fs)
	rc.cont.register(fs)
	fs.StringArrayVar(&rc.include, "include", nil, "server mode: copy only databases matching this glob (repeatable; shell-style: * and ? do not match /, [!a-c] negates a class)")
	fs.StringArrayVar(&rc.exclude, "exclude", nil, "server mode: skip databases matching this glob (repeatable; wins over --include)")
	rc.shard.register(fs, "copy")
	fs.BoolVar(&rc.withUsers, "with-users", false, "server mode: also copy _users (skipped by default: it holds password hashes and the target may have its own users), with or without --include; _replicator and _global_changes are always skipped unless named by --include")
	fs.BoolVar(&rc.reuseExisting, "reuse-existing", false, "server mode: write into existing non-empty target databases (without it each is left as it is and reported as failed, exit 3, unless it holds this job's checkpoint); their _revs_limit and _security become the source's (a warning names what was replaced)")
	fs.IntVar(&rc.q, "q", 0, "server mode: shards (q) of created databases (0: the target's default)")
	fs.IntVar(&rc.n, "n", 0, "server mode: replicas (n) of created databases (0: the target's default)")
	fs.StringVar(&rc.checkpoints, "checkpoints", checkpointsTarget, "where checkpoints are written: target (only the target is written to; the source needs read access only) or both (source and target, as CouchDB's replicator does)")
	fs.DurationVar(&rc.cont.flushInterval, "flush-interval", replicate.DefaultFlushInterval, "with --continuous: the longest a change waits for its batch to fill before the batch is copied (0: copy what the feed delivered at once)")
	fs.StringVar(&rc.verifyMode, "verify", "cheap", "server mode: check each database after copying it: cheap (doc counts; on a mismatch every document is compared, the database copied once more, and each remaining difference reported), full (compare every document and leaf revision of the source with the target, same retry), none; the target may hold more than the source (documents or revisions of its own are not differences, but a document deleted on one side and live on the other is warned of: sofa verify SOURCE TARGET lists them)")
	return cmd
}

func (rc *replicateCmd) logf(format string, args ...any) {
	if rc.verbose || rc.debug {
		fmt.Fprintf(os.Stderr, "sofa: "+format+"\n", args...)
	}
}

// serverModeFlags are replicate's flags that choose or shape the
// databases of a whole-server run.
var serverModeFlags = []string{"include", "exclude", "with-users", "reuse-existing", "q", "n", "verify"}

// oneDBHint is what a copy of one database offers instead of the server
// mode flags given: --create-target and --copy-security stand for
// --reuse-existing, --q and --n.
func oneDBHint(given []string) string {
	for _, f := range given {
		switch f {
		case "--reuse-existing", "--q", "--n":
			return "; for one database see --create-target and --copy-security"
		}
	}
	return ""
}

// continuousFlagNames are replicate's flags that shape a continuous run
// alone (--delete-missing says more, in run).
var continuousFlagNames = []string{"metrics-addr", "flush-interval", "poll-interval", "security-interval"}

// Values of `replicate --checkpoints`. Target-only is the default: it
// spares the source a write per checkpoint and lets read-only credentials
// work, and a source database recreated since the checkpoint is still
// caught (instance_start_time, update_seq, and the anchor revision the
// checkpoint records, checked with `_revs_diff`).
const (
	checkpointsTarget = "target"
	checkpointsBoth   = "both"
)

func (rc *replicateCmd) run(ctx context.Context, srcURL, tgtURL string) error {
	if rc.checkpoints != checkpointsTarget && rc.checkpoints != checkpointsBoth {
		return usageErr("--checkpoints %q: want target or both", rc.checkpoints)
	}
	if rc.checkpoints == checkpointsBoth && rc.engine.noCheckpoints {
		return usageErr("--checkpoints both writes checkpoints that --no-checkpoints leaves out: give one of them")
	}
	if rc.cont.flushInterval < 0 {
		return usageErr("--flush-interval must not be negative")
	}
	if _, err := rc.shard.shard(); err != nil {
		return err
	}
	// An archive on either side is another verb's (sofa.Copy says the same).
	if ar, err := isArchive(srcURL, "SOURCE"); err != nil {
		return err
	} else if ar {
		return usageErr("invalid source URL %q: replicate copies between servers; to copy an archive into a server use sofa restore %s TARGET", sofa.Redact(srcURL), sofa.Redact(srcURL))
	}
	if ar, err := isArchive(tgtURL, "TARGET"); err != nil {
		return err
	} else if ar {
		return usageErr("invalid target URL %q: replicate copies between servers; to copy a server into an archive use sofa backup SOURCE %s", sofa.Redact(tgtURL), sofa.Redact(tgtURL))
	}
	copts := rc.client.options()
	copts.OutageClock = !rc.cont.continuous
	copts.Log = rc.logf
	// Per-host adaptive limits: fewer requests in flight on 429, 503 and
	// timeouts, a pause on Retry-After, growth again once the host keeps up.
	sl, tl := rc.control.limiters(srcURL, tgtURL)
	srcEP, err := openEndpoint(ctx, srcURL, "SOURCE", rc.client.forRole("SOURCE", copts), sl)
	if err != nil {
		return err
	}
	tgtEP, err := openEndpoint(ctx, tgtURL, "TARGET", rc.client.forRole("TARGET", copts), tl)
	if err != nil {
		return err
	}
	src, tgt := srcEP.Couch(), tgtEP.Couch()
	rc.counters = []*couch.Counters{src.Server.Stats, tgt.Server.Stats}
	rc.watch = sofa.NewStallWatch(srcEP, tgtEP)
	if err := sofa.CheckDistinct(srcEP, tgtEP); err != nil {
		return err // before any metrics server or progress starts
	}
	if rc.cont.deleteMissing && !(src.DBName == "" && tgt.DBName == "" && rc.cont.continuous) {
		return usageErr("--delete-missing: continuous server mode only (--continuous with two server URLs); a one-shot copy never deletes")
	}
	switch {
	case src.DBName == "" && tgt.DBName == "" && rc.cont.continuous:
		return rc.runServersContinuous(ctx, srcEP, tgtEP)
	case src.DBName == "" && tgt.DBName == "":
		return rc.runServers(ctx, srcEP, tgtEP)
	case src.DBName == "" || tgt.DBName == "":
		return usageErr("SOURCE and TARGET must both be databases or both be servers")
	case rc.shard.raw != "":
		return usageErr("--shard: a sharded run copies the databases of a server: give two server URLs")
	case len(rc.serverFlags) > 0:
		return usageErr("%s: server mode only (SOURCE and TARGET are databases; give two server URLs%s)", strings.Join(rc.serverFlags, ", "), oneDBHint(rc.serverFlags))
	}
	rc.engine.setMemoryLimit(0)
	res, err := rc.replicateDB(ctx, srcEP, tgtEP)
	return rc.finish(res, err, os.Stdout)
}

// replicateDB copies one database, creating the target when asked.
func (rc *replicateCmd) replicateDB(ctx context.Context, src, tgt *sofa.Endpoint) (*replicate.Result, error) {
	opts := rc.engine.options()
	opts.Warn = func(s string) {
		if !rc.quiet {
			fmt.Fprintln(os.Stderr, "sofa: warning: "+s)
		}
	}
	if rc.debug {
		opts.Debug = rc.logf
	}
	if rc.cont.continuous {
		opts.Continuous = true
		opts.MetadataInterval = rc.cont.securityEvery // negative: never
		opts.FlushInterval = rc.cont.flushInterval
		if opts.FlushInterval == 0 {
			opts.FlushInterval = -1 // the library's "no wait"
		}
		name := src.DBName()
		if rc.cont.metricsAddr != "" {
			obs, err := rc.serveDBMetrics(ctx, name)
			if err != nil {
				return nil, err
			}
			opts.Observer = obs
		}
		opts.Log = func(s string) {
			if !rc.quiet {
				fmt.Fprintf(os.Stderr, "sofa: %s: %s\n", name, s)
			}
		}
	}
	stopProgress := rc.progress(ctx, &opts, src.DBName())
	defer stopProgress()
	res, err := sofa.CopyDB(ctx, src, tgt, sofa.CopyDBOptions{Engine: opts, CreateTarget: rc.createTarget,
		CopySecurity: rc.copySecurity, SourceCheckpoints: rc.checkpoints == checkpointsBoth})
	if err != nil && res == nil {
		return nil, err
	}
	return res, err
}

// progress prints a line to stderr unless quiet, looking every
// --progress-interval (2 s): when a counter changed since the last line,
// or, while none does, every six intervals a line saying for how long and
// what the run waits on (retried requests, the host).
func (rc *replicateCmd) progress(ctx context.Context, opts *replicate.Options, name string) func() {
	if opts.Counters == nil {
		opts.Counters = &replicate.Counters{}
	}
	if rc.quiet || rc.jsonOut && rc.progressEvery <= 0 {
		return func() {}
	}
	every := rc.progressEvery
	if every <= 0 {
		every = 2 * time.Second
	}
	gate := progress.Gate{Quiet: progress.DefaultQuiet(every)}
	done := make(chan struct{})
	c := opts.Counters
	t0 := time.Now()
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				s := c.Snapshot()
				line := fmt.Sprintf("%d changes read, %d revisions written", s.ChangesRead, s.DocsWritten)
				tail := fmt.Sprintf("%s, %d failures", humanBytes(s.Bytes), s.DocWriteFailures)
				print, stalled := gate.Check(line+tail, time.Now())
				if !print {
					continue
				}
				waiting := rc.watch.Waiting(stalled > 0) // retries since the last change
				switch {
				case stalled > 0 && rc.cont.continuous:
					// Following an idle source: nothing to say.
				case stalled > 0:
					fmt.Fprintf(os.Stderr, "sofa: %s: no change for %s (%s, %s): %s\n", name, stalled.Round(100*time.Millisecond), line, tail, waiting)
				default:
					rate := float64(s.DocsWritten) / time.Since(t0).Seconds()
					fmt.Fprintf(os.Stderr, "sofa: %s: %s (%.0f/s), %s\n", name, line, rate, tail)
				}
			}
		}
	}()
	return func() { close(done) }
}

// finish prints the result and returns the outcome.
func (rc *replicateCmd) finish(res *replicate.Result, err error, out io.Writer) error {
	if res != nil {
		h := sumHTTP(rc.counters)
		if rc.jsonOut {
			d := resultJSON(res, h, err)
			var msg string
			d.ExitCode, msg = exitFor(&outcome{res: res, err: err}, false)
			if d.Status == "interrupted" {
				d.Error = msg // what the line on stderr says, not "context canceled"
			}
			printJSON(out, d)
		} else if !rc.quiet {
			printSummary(os.Stderr, res, h, err != nil)
		} else {
			printFailures(os.Stderr, res.Failures)
		}
	}
	if res == nil {
		return err // nothing was copied
	}
	return &outcome{res: res, err: err}
}

// usersIncluded is --include with _users added when --with-users is
// given beside it: an --include of other names ('tenant-*') left _users
// out without a word.
func usersIncluded(include []string, withUsers bool) []string {
	if !withUsers || len(include) == 0 {
		return include
	}
	return append(slices.Clone(include), "_users")
}
