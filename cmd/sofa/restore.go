package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/limit"
	"github.com/sofadb/sofa/replicate"
)

type restoreCmd struct {
	engine         engineFlags
	client         clientFlags
	control        controlFlags
	out            outputFlags
	include        []string
	exclude        []string
	renames        []string
	reuseExisting  bool
	withReplicator bool
	q, n           int
}

func newRestoreCmd() *cobra.Command {
	c := &restoreCmd{}
	cmd := &cobra.Command{
		Use:   "restore ARCHIVE... TARGET",
		Short: "Restore archives (a full one and its incrementals, in order) into a server or database",
		Long: `Restore the databases of an archive into TARGET, a server URL (every
database under its own name, or --rename OLD=NEW) or a database URL (an
archive holding one database, or --include selecting one). Several archives
are a chain: a full archive, then its incrementals in order; archives that
do not form a chain are refused. ARCHIVE - reads stdin.

Databases are created with their original properties (partitioned; q and n
only with --q/--n), _revs_limit is set first, design documents are written
after the other documents and _security last. _users is restored;
_replicator only with --with-replicator (its documents would start
replications on the target). A non-empty target database is refused unless
--reuse-existing, or it holds this restore's own checkpoint (a killed
restore resumes).

` + exitCodesHelp,
		Example: `  sofa restore full.sofa http://admin:pw@new:5984
  sofa restore full.sofa inc1.sofa inc2.sofa http://admin:pw@new:5984
  sofa restore orders.sofa http://admin:pw@new:5984 --rename orders=orders-copy
  ssh elsewhere 'cat orders.sofa' | sofa restore - http://admin:pw@new:5984/orders`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageErr("restore needs ARCHIVE... and TARGET (got %d arguments)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := applyEnvAndConfig(cmd); err != nil {
				return err
			}
			return c.run(cmd.Context(), args[:len(args)-1], args[len(args)-1])
		},
	}
	fs := cmd.Flags()
	c.engine.register(fs)
	c.client.register(fs)
	c.control.register(fs)
	registerOutput(fs, &c.out)
	fs.StringArrayVar(&c.include, "include", nil, "restore only databases matching this glob (repeatable; * does not match /)")
	fs.StringArrayVar(&c.exclude, "exclude", nil, "skip databases matching this glob (repeatable; wins over --include)")
	fs.StringArrayVar(&c.renames, "rename", nil, "restore database OLD under the name NEW (OLD=NEW, repeatable)")
	fs.BoolVar(&c.reuseExisting, "reuse-existing", false, "write into existing non-empty target databases")
	fs.BoolVar(&c.withReplicator, "with-replicator", false, "also restore _replicator (its documents start replications on the target)")
	fs.IntVar(&c.q, "q", 0, "shards (q) of created databases (0: the target's default)")
	fs.IntVar(&c.n, "n", 0, "replicas (n) of created databases (0: the target's default)")
	fs.String("config", "", "TOML file of flag values (keys are flag names)")
	return cmd
}

func (c *restoreCmd) run(ctx context.Context, archives []string, tgtURL string) error {
	renames := map[string]string{}
	for _, r := range c.renames {
		old, nu, ok := strings.Cut(r, "=")
		if !ok || old == "" || nu == "" {
			return usageErr("--rename %q: want OLD=NEW", r)
		}
		renames[old] = nu
	}
	skip := []string{"_replicator"}
	if c.withReplicator {
		skip = nil
	}
	filter := fleet.Filter{Include: c.include, Exclude: c.exclude, Skip: skip}
	if err := filter.Validate(); err != nil {
		return usageErr("%v", err)
	}
	if err := checkChain(archives); err != nil {
		return err
	}
	tl := limit.New(limit.Options{Name: hostOf(tgtURL), Max: c.control.maxRequests, Fixed: c.control.fixed, RPS: c.control.maxRPS})
	copts := c.client.options()
	copts.Log = c.out.logf
	copts.Pacer = pacer{tl}
	tgt, err := openEndpoint(ctx, tgtURL, "TARGET", copts)
	if err != nil {
		return err
	}
	c.engine.setMemoryLimit(64 << 20)
	sum := fleet.Summary{Started: time.Now()}
	var fatalErr error
	for i, path := range archives {
		if err := c.restoreArchive(ctx, path, i > 0, tgt, filter, renames, &sum); err != nil {
			fatalErr = err
			break
		}
	}
	sum.Duration = fleet.Duration(time.Since(sum.Started))
	if c.out.jsonOut {
		printJSON(os.Stdout, sum)
	} else if !c.out.quiet {
		printFleetSummary(os.Stderr, &sum)
	}
	switch {
	case fatalErr != nil:
		return fatalErr
	case sum.DBsTotal == 0:
		return fatal(errors.New("no database of the archive was selected"))
	case sum.DBsOK != sum.DBsTotal:
		return &exitError{code: exitPartial, err: fmt.Errorf("%d of %d databases were not restored completely (listed above)", sum.DBsTotal-sum.DBsOK, sum.DBsTotal)}
	}
	return nil
}

// checkChain reads the headers of archive files and refuses archives that
// do not form a chain (a full archive, then incrementals in order).
func checkChain(archives []string) error {
	for _, a := range archives {
		if a == "-" && len(archives) > 1 {
			return usageErr("stdin (-) can only be the one archive of a restore")
		}
	}
	if len(archives) == 1 && archives[0] == "-" {
		return nil
	}
	var headers []archive.Header
	for _, path := range archives {
		f, err := openArchive(path)
		if err != nil {
			return err
		}
		h, err := archive.ReadHeader(f)
		f.Close()
		if err != nil {
			return fatal(fmt.Errorf("%s: %v", path, err))
		}
		headers = append(headers, h)
	}
	if err := archive.CheckChain(headers...); err != nil {
		return fatal(err)
	}
	return nil
}

// restoreArchive restores every selected database of one archive, in
// archive order. A damaged archive stops the restore (fatal): nothing after
// the damage is used, and the database being restored is reported failed.
func (c *restoreCmd) restoreArchive(ctx context.Context, path string, incremental bool, tgt *couch.Endpoint, filter fleet.Filter, renames map[string]string, sum *fleet.Summary) error {
	f, err := openArchive(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rd, err := archive.NewReader(f, nil)
	if err != nil {
		return fatal(fmt.Errorf("%s: %v", path, err))
	}
	defer rd.Close()
	picked := 0
	for {
		dbr, err := rd.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fatal(fmt.Errorf("%s: %v", path, err))
		}
		if !filter.Match(dbr.Name()) {
			continue
		}
		picked++
		name := dbr.Name()
		if nu, ok := renames[name]; ok {
			name = nu
		}
		if tgt.DBName != "" {
			if picked > 1 {
				return usageErr("%s holds several databases: restore into a server URL, or select one with --include", path)
			}
			name = tgt.DBName
		}
		t0 := time.Now()
		r, err := c.restoreDB(ctx, dbr, tgt.Server.DB(name), incremental)
		r.Duration = fleet.Duration(time.Since(t0))
		addResult(sum, r, err)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return &exitError{code: exitInterrupted, err: errors.New("interrupted: checkpoints written; run the same command again to resume")}
			}
			var ae *archive.Error
			if errors.As(err, &ae) {
				return fatal(fmt.Errorf("%s: %v", path, err))
			}
		}
	}
}

func (c *restoreCmd) restoreDB(ctx context.Context, dbr *archive.DBReader, tdb *couch.DB, incremental bool) (fleet.DBResult, error) {
	r := fleet.DBResult{Name: tdb.Name()}
	meta, err := dbr.Metadata(ctx)
	if err != nil {
		return r, err
	}
	if err := c.prepareTarget(ctx, dbr, tdb, meta, incremental); err != nil {
		return r, err
	}
	target := replicate.NewDesignLast(tdb)
	opts := c.engine.options()
	opts.CopyMetadata = true
	opts.Counters = &replicate.Counters{}
	opts.Warn = func(s string) { c.out.logf("%s: %s", tdb.Name(), s) }
	if !c.out.quiet && !c.out.jsonOut {
		fmt.Fprintf(os.Stderr, "sofa: restoring %s\n", tdb.Name())
	}
	res, err := replicate.Run(ctx, dbr, target, opts)
	fillResult(&r, res)
	if err != nil {
		return r, err
	}
	fails, err := target.Finish(ctx)
	if res != nil && len(fails) > 0 {
		r.Failures = append(r.Failures, fails...)
		r.DocWriteFailures += int64(len(fails))
		r.DocsWritten -= int64(len(fails))
	}
	if err != nil {
		return r, err
	}
	if s, ok := dbr.Summary(); ok && s.Error != "" {
		return r, fmt.Errorf("the backup of this database failed part way: %s", s.Error)
	}
	return r, nil
}

func (c *restoreCmd) prepareTarget(ctx context.Context, dbr *archive.DBReader, tdb *couch.DB, meta replicate.Metadata, incremental bool) error {
	tinfo, err := tdb.Info(ctx)
	if errors.Is(err, replicate.ErrNotFound) {
		err := tdb.Server().CreateDB(ctx, tdb.Name(), couch.CreateOptions{Partitioned: meta.Partitioned, Q: c.q, N: c.n})
		if err != nil && !errors.Is(err, couch.ErrExists) {
			return fmt.Errorf("target: %v", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("target: %v", err)
	}
	if c.reuseExisting || incremental || tinfo.DocCount+tinfo.DelCount == 0 || tdb.Name() == "_users" {
		return nil
	}
	sinfo, _ := dbr.Info(ctx)
	id := replicate.ReplicationID(sinfo.Identity, tinfo.Identity)
	if _, err := tdb.GetLocal(ctx, "_local/"+id); err == nil {
		return nil // this restore's own checkpoint: resume
	}
	return errNotEmpty
}

// addResult counts one database's outcome into a summary.
func addResult(s *fleet.Summary, r fleet.DBResult, err error) {
	switch {
	case err != nil && errors.Is(err, context.Canceled):
		r.Status = fleet.StatusInterrupted
		s.DBsInterrupted++
		s.Interrupted = true
	case err != nil:
		r.Status, r.Error = fleet.StatusFailed, err.Error()
		s.DBsFailed++
	case len(r.Failures) > 0 || r.DocWriteFailures > 0:
		r.Status = fleet.StatusPartial
		s.DBsPartial++
	default:
		r.Status = fleet.StatusOK
		s.DBsOK++
	}
	s.DBsTotal++
	s.DocsRead += r.DocsRead
	s.DocsWritten += r.DocsWritten
	s.DocWriteFailures += r.DocWriteFailures
	s.MissingChecked += r.MissingChecked
	s.MissingFound += r.MissingFound
	s.Bytes += r.Bytes
	s.DBs = append(s.DBs, r)
}
