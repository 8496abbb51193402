// Command sofa moves CouchDB data fast and without loss: replicate a
// database or a whole server, back it up into one archive, restore it and
// verify it, over the CouchDB replication protocol.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sofadb/sofa/storage"
)

var version = "0.1.0-dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) (code int) {
	defer startProfiles()()
	// A panic is a bug: one line (the stack only with --debug), exit 1.
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(os.Stderr, "sofa: internal error: %v (please report it; rerun with --debug for details)\n", p)
			if slices.Contains(args, "--debug") {
				os.Stderr.Write(debug.Stack())
			}
			code, _ = exitFor(fatal(fmt.Errorf("internal error: %v", p)), false)
		}
	}()
	stdLog(args)
	ctx, stop := interruptible(func(msg string) {
		// --json: stdout holds one document whatever happened (the
		// lock is kept: the run prints nothing more before the exit).
		jsonMu.Lock()
		printFailureJSONLocked(os.Stdout, runningCmd.Load(), args, exitInterrupted, msg)
	})
	defer stop()
	// A write to a closed stdout (backup ... - | head) must fail with
	// EPIPE and be reported, not kill the process: for fd 1 and 2 Go
	// raises SIGPIPE unless it is notified (see os/signal).
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	root := newRoot()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil && strings.HasPrefix(err.Error(), "unknown command") {
		err = usageErr("%v (see sofa --help)", strings.SplitN(err.Error(), "\n", 2)[0])
	}
	code, msg := exitFor(err, ctx.Err() != nil)
	if jsonPrinted.Load() {
		// --json lists them in its document, not on stderr
		msg = strings.ReplaceAll(msg, "(listed above)", "(listed in the JSON document on stdout)")
	}
	if msg != "" {
		fmt.Fprintln(os.Stderr, "sofa: "+escapeControls(msg))
	}
	// A run that stopped before printing its --json document prints one
	// saying why, so that stdout is JSON whatever happened.
	printFailureJSON(os.Stdout, cmd, args, code, msg)
	return code
}

// interruptible returns a context cancelled by the first SIGINT, SIGTERM
// or SIGHUP (a closed terminal or ssh session): the run then finishes its writes in flight and its final
// checkpoints, which takes a while when the target does not answer; a
// second signal exits at once (130), the checkpoints written before it
// kept, after atExit is told the line printed. stop releases the signals.
func interruptible(atExit func(msg string)) (context.Context, func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
		case <-done:
			return
		}
		// printed before the run is told: its final line comes after
		if !quietRun() {
			fmt.Fprintln(os.Stderr, "sofa: "+stoppingLine())
		}
		cancel()
		select {
		case <-sigs:
			msg := "interrupted again: stopped at once; run the same command again to resume from the last checkpoint written"
			if c := runningCmd.Load(); c != nil && c.Name() == "backup" {
				msg = "interrupted again: stopped at once; no archive was written; run the same command again to start over"
			}
			storage.RemoveLiveTemps() // an archive being written: its temporary file
			fmt.Fprintln(os.Stderr, "sofa: "+msg)
			atExit(msg)
			os.Exit(exitInterrupted)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "sofa",
		Short: "Move CouchDB data fast and without loss",
		Long: `sofa replicates CouchDB databases and whole servers over the CouchDB
replication protocol, backs them up into one archive, restores and verifies
them. It works with Apache CouchDB 2.x/3.x, Cloudant and PouchDB Server.

Credentials come from the URL (http://user:pass@host:5984), or from
SOFA_SOURCE_USER/SOFA_SOURCE_PASSWORD and SOFA_TARGET_USER/SOFA_TARGET_PASSWORD;
they never appear in output, logs or errors.

` + exitCodesHelp,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr("%w (see %s --help)", err, c.CommandPath())
	})
	root.AddCommand(newReplicateCmd())
	root.AddCommand(newBackupCmd())
	root.AddCommand(newRestoreCmd())
	root.AddCommand(newLsCmd())
	root.AddCommand(newVerifyCmd())
	for _, c := range root.Commands() {
		c.SetFlagErrorFunc(root.FlagErrorFunc())
	}
	return root
}

// quietRun says the verb running was given --quiet ("print nothing but
// errors": the first interrupt's "stopping" line is none).
func quietRun() bool {
	c := runningCmd.Load()
	if c == nil {
		return false
	}
	f := c.Flags().Lookup("quiet")
	return f != nil && f.Value.String() == "true"
}

// stoppingLine is what the first interrupt prints: a verb that writes
// finishes its writes in flight and its checkpoints; one that only reads
// (verify, ls) just stops.
func stoppingLine() string {
	if c := runningCmd.Load(); c != nil && (c.Name() == "verify" || c.Name() == "ls") {
		return "stopping (interrupt again to stop at once)"
	} else if c != nil && c.Name() == "backup" {
		// nothing to resume from: the archive is not written
		return "stopping: the archive is not written (interrupt again to stop at once)"
	}
	return "stopping: finishing the writes in flight and the final checkpoints (interrupt again to stop at once)"
}

// stdLog sets the standard logger, which net/http writes a few of a
// server's misbehaviours to (an answer on an idle connection, which
// CouchDB sends when a cluster node is lost): a raw, timestamped line
// among sofa's own. It is kept with --debug only, as a debug line.
func stdLog(args []string) {
	log.SetFlags(0)
	if slices.Contains(args, "--debug") {
		log.SetPrefix("sofa: debug: ")
		log.SetOutput(os.Stderr)
		return
	}
	log.SetOutput(io.Discard)
}
