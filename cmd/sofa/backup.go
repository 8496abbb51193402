package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/limit"
	"github.com/sofadb/sofa/internal/progress"
	"github.com/sofadb/sofa/replicate"
)

type backupCmd struct {
	engine      engineFlags
	client      clientFlags
	control     controlFlags
	out         outputFlags
	include     []string
	exclude     []string
	since       string
	compression string
	force       bool
}

func newBackupCmd() *cobra.Command {
	bc := &backupCmd{}
	cmd := &cobra.Command{
		Use:   "backup SOURCE ARCHIVE",
		Short: "Back a server or a database up into one archive file",
		Long: `Back up every database of a server (or one database) into one archive:
every leaf revision with its history, tombstones, bodies byte for byte,
attachments in their stored encoding (each distinct one stored once), and
each database's _security, _revs_limit and properties. The source is never
written. ARCHIVE is a file (written to a temporary name, synced, then
renamed: a killed backup leaves nothing under the final name) or - for
stdout. With --since PREVIOUS, only what changed after PREVIOUS is stored
(an incremental archive; a database recreated meanwhile is stored in full).
_global_changes is skipped; _users and _replicator are included.
The format is described in docs/archive-format.md.

` + exitCodesHelp,
		Example: `  sofa backup http://admin:pw@db:5984 full.sofa
  sofa backup http://admin:pw@db:5984 inc1.sofa --since full.sofa
  sofa backup http://admin:pw@db:5984/orders - | ssh elsewhere 'cat > orders.sofa'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageErr("backup needs SOURCE and ARCHIVE (got %d arguments)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := configure(cmd, &bc.engine); err != nil {
				return err
			}
			return bc.run(cmd.Context(), args[0], args[1])
		},
	}
	fs := cmd.Flags()
	bc.engine.register(fs)
	bc.client.register(fs)
	bc.control.register(fs)
	registerOutput(fs, &bc.out)
	fs.StringArrayVar(&bc.include, "include", nil, "back up only databases matching this glob (repeatable; * does not match /)")
	fs.StringArrayVar(&bc.exclude, "exclude", nil, "skip databases matching this glob (repeatable; wins over --include)")
	fs.StringVar(&bc.since, "since", "", "previous archive of the chain: store only what changed after it")
	fs.StringVar(&bc.compression, "compression", "zstd", "compression of archive members: zstd, gzip or none")
	fs.BoolVar(&bc.force, "force", false, "overwrite an existing archive file")
	fs.String("config", "", "TOML file of flag values (keys are flag names)")
	return cmd
}

func (bc *backupCmd) run(ctx context.Context, srcURL, path string) error {
	comp, err := archive.ParseCompression(bc.compression)
	if err != nil {
		return usageErr("--compression: %v", err)
	}
	if path == "-" && bc.out.jsonOut {
		return usageErr("--json prints the summary on stdout, which carries the archive when ARCHIVE is -")
	}
	filter := fleet.Filter{Include: bc.include, Exclude: bc.exclude, Skip: fleet.BackupSkip}
	if err := filter.Validate(); err != nil {
		return usageErr("%v", err)
	}
	sl := bc.control.newLimiter(hostOf(srcURL))
	copts := bc.client.options()
	copts.Log = bc.out.logf
	copts.Pacer = pacer{sl}
	src, err := openEndpoint(ctx, srcURL, "SOURCE", copts)
	if err != nil {
		return err
	}
	dbs, err := selectDBs(ctx, src, filter)
	if err != nil {
		return err
	}
	source := src.Server.UUID
	if source == "" {
		source = src.Server.URL()
	}
	var since *archive.Since
	if bc.since != "" {
		if since, err = readSince(bc.since); err != nil {
			return fatal(fmt.Errorf("--since %s: %w", bc.since, err))
		}
		if since.Source != "" && since.Source != source {
			return usageErr("--since %s: that archive is a backup of another server (%s), not of %s (%s); take a full backup (without --since)", bc.since, since.Source, src.Server.URL(), source)
		}
	}
	sink, err := createArchive(ctx, path, bc.force, bc.out.logf)
	if err != nil {
		return err
	}
	tempDir := ""
	if path != "-" {
		tempDir = filepath.Dir(path)
	}
	w, err := archive.NewWriter(sink, archive.Options{Compression: comp, Tool: "sofa " + version, Source: source, Since: since, TempDir: tempDir})
	if err != nil {
		sink.Abort()
		return fatal(fmt.Errorf("write archive: %v", err))
	}
	budget := replicate.NewBudget(bc.engine.maxInflight)
	bc.engine.setMemoryLimit(int64(bc.control.maxDBs) << 20)
	job := func(ctx context.Context, name string, p *progress.DB) (fleet.DBResult, error) {
		return bc.backupDB(ctx, src.Server, w, name, p, budget)
	}
	watch := &stallWatch{}
	watch.add(sl, src.Server.Stats)
	_, runErr := runDBs(ctx, dbs, job, []*limit.Limiter{sl}, watch, bc.control, bc.out, "backed up")
	if codeOf(runErr) == exitInterrupted {
		sink.Abort()
		return &exitError{code: exitInterrupted, err: errors.New("interrupted: no archive was written (a backup starts over when run again)")}
	}
	if codeOf(runErr) == exitFatal {
		sink.Abort()
		return runErr
	}
	if err := w.Close(); err != nil {
		sink.Abort()
		return fatal(fmt.Errorf("write archive: %v", err))
	}
	if err := sink.Commit(); err != nil {
		return fatal(err)
	}
	if !bc.out.quiet && path != "-" {
		if st, err := archives.Stat(ctx, path); err == nil {
			fmt.Fprintf(os.Stderr, "sofa: archive %s written (%s)\n", path, humanBytes(st.Size))
		}
	}
	return runErr
}

// selectDBs lists the databases a verb works on: the one named in a
// database URL, or the server's databases kept by filter.
func selectDBs(ctx context.Context, ep *couch.Endpoint, filter fleet.Filter) ([]string, error) {
	if ep.DBName != "" {
		if _, err := ep.Server.DB(ep.DBName).Info(ctx); err != nil {
			return nil, fatal(fmt.Errorf("source: %v", err))
		}
		return []string{ep.DBName}, nil
	}
	names, err := fleet.ListDBs(ctx, ep.Server, 1000)
	if err != nil {
		return nil, fatal(fmt.Errorf("source: list databases: %v", err))
	}
	dbs := filter.Apply(names)
	if len(dbs) == 0 {
		return nil, fatal(fmt.Errorf("source: no database matches (of %d listed)", len(names)))
	}
	return dbs, nil
}

// backupDB copies one database into the archive through the engine: the
// archive's database writer is the Target.
func (bc *backupCmd) backupDB(ctx context.Context, srv *couch.Server, w *archive.Writer, name string, p *progress.DB, budget *replicate.Budget) (fleet.DBResult, error) {
	r := fleet.DBResult{Name: name}
	sdb := srv.DB(name)
	sdb.ReadOnly = true // a backup never writes to the source
	sinfo, err := sdb.Info(ctx)
	if err != nil {
		return r, fmt.Errorf("source: %v", err)
	}
	p.SetDocsTotal(sinfo.DocCount + sinfo.DelCount)
	dbw, err := w.Database(name)
	if err != nil {
		return r, err
	}
	dbw.SetSourceInfo(sinfo)
	opts := bc.engine.options()
	opts.CopyMetadata = true
	opts.Budget = budget
	opts.Counters = &replicate.Counters{}
	opts.SourceReadOnly = true
	opts.Warn = func(s string) { bc.out.logf("%s: %s", name, s) }
	opts.Debug = bc.out.debugf(name)
	stop := feedProgress(opts.Counters, p)
	res, err := replicate.Run(ctx, sdb, dbw, opts)
	stop()
	fillResult(&r, res)
	if err != nil {
		dbw.Abort(err.Error())
		return r, err
	}
	if len(res.Failures) > 0 {
		// The archive must not present this database as whole.
		f := res.Failures[0]
		return r, dbw.Abort(fmt.Sprintf("%d revisions not backed up (first: id %q rev %s: %s: %s)", len(res.Failures), f.ID, f.Rev, f.Error, f.Reason))
	}
	if err := dbw.Close(); err != nil {
		return r, err
	}
	return r, nil
}

// fillResult adds a replication's counters and failures to r (nil res:
// nothing to add).
func fillResult(r *fleet.DBResult, res *replicate.Result) {
	if res == nil {
		return
	}
	st := res.Stats
	r.Merge(fleet.DBResult{DocsRead: st.DocsRead, DocsWritten: st.DocsWritten, DocWriteFailures: st.DocWriteFailures,
		MissingChecked: st.MissingChecked, MissingFound: st.MissingFound, Bytes: st.Bytes, Failures: res.Failures})
}

// readSince reads the seqs an incremental backup continues from.
func readSince(path string) (*archive.Since, error) {
	r, err := archives.Open(context.Background(), path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return archive.ReadSince(r)
}
