package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/archive"
)

type backupCmd struct {
	engine      engineFlags
	client      clientFlags
	control     controlFlags
	out         outputFlags
	include     []string
	exclude     []string
	since       string
	shard       shardFlag
	setID       string
	compression string
	archiveVer  int
	force       bool
	s3          s3Flags
}

func newBackupCmd() *cobra.Command {
	bc := &backupCmd{}
	cmd := &cobra.Command{
		Use:   "backup SOURCE ARCHIVE",
		Short: "Back a server, a database or an archive up into one archive file",
		Long: `Back up every database of a server (or one database) into one archive:
every leaf revision with its history, tombstones, bodies byte for byte,
attachments in their stored encoding (each distinct one stored once), and
each database's _security, _revs_limit and properties. The source is never
written. ARCHIVE is a file (written to a temporary name, synced, then
renamed: a killed backup leaves nothing under the final name), - for
stdout, or s3://BUCKET/KEY (a multipart upload of --transfers parts of
--part-size bytes in flight, checked once completed, aborted on failure:
nothing under the key; credentials from the AWS environment, profile or
instance role). With --since PREVIOUS, only what changed after PREVIOUS is stored
(an incremental archive; a database recreated meanwhile is stored in full).
_global_changes is skipped; _users and _replicator are included.
The format is described in docs/archive-format.md.

With --shard i/n (a server SOURCE), this worker backs up only the databases
of shard i (by a stable hash of each name) into the member
NAME.shard-i-of-n.EXT of ARCHIVE NAME.EXT, and writes the set manifest
NAME.set.json (every worker writes the same). Give n workers 0/n .. n-1/n
and the same --set-id; restore and verify take the set (NAME.set.json, or
ARCHIVE) and refuse it while a member is missing or from another run.

SOURCE may also be a full archive (a file, - for stdin, or s3://BUCKET/KEY):
its databases (--include, --exclude) are copied into the new ARCHIVE, which
records the same source server and, per database, the same seqs and
checkpoints, so that a later backup --since ARCHIVE of the server continues
it (from stdin, whose checkpoints come last, such a backup stores each
database whole). A database the source archive holds not whole stays
marked not whole (exit code 3). --since and --shard need a server SOURCE;
an incremental archive is refused: consolidate its chain with
sofa restore FULL INC... NEW.sofa.

` + exitCodesHelp,
		Example: `  sofa backup http://admin:pw@db:5984 full.sofa
  sofa backup http://admin:pw@db:5984 inc1.sofa --since full.sofa
  sofa backup http://admin:pw@db:5984 s3://backups/full.sofa --transfers 8
  sofa backup http://admin:pw@db:5984/orders - | ssh elsewhere 'cat > orders.sofa'
  sofa backup full.sofa s3://backups/full.sofa --include 'orders*'   # an archive into a new archive
  sofa backup http://admin:pw@db:5984 backup.sofa --shard 2/8 --set-id nightly-42   # writes backup.shard-2-of-8.sofa and backup.set.json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageErr("backup needs SOURCE and ARCHIVE (got %s)", arguments(len(args)))
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
	// A backup writes nothing to the source: the seqs it reaches go into
	// the archive, where an incremental backup continues from them.
	_ = fs.MarkHidden("no-checkpoints")
	bc.client.register(fs)
	bc.control.register(fs)
	fs.Lookup("max-dbs").Usage = "most databases backed up at once (0: the default)"
	registerOutput(fs, &bc.out)
	bc.s3.register(fs, &bc.client.retryTime)
	fs.StringArrayVar(&bc.include, "include", nil, "back up only databases matching this glob (repeatable; shell-style: * and ? do not match /, [!a-c] negates a class)")
	fs.StringArrayVar(&bc.exclude, "exclude", nil, "skip databases matching this glob (repeatable; wins over --include)")
	fs.StringVar(&bc.since, "since", "", "previous archive of the chain: store only what changed after it, in an archive of a new name (the chain needs the previous one: writing over it is refused); it is checked whole first, as sofa verify ARCHIVE does (a damaged one is refused); every database of it that the source still holds must be selected again (a restore of the chain takes one left out for deleted)")
	bc.shard.register(fs, "back up")
	fs.StringVar(&bc.setID, "set-id", "", "with --shard: the name of this run, the same for its n workers (recorded in the set manifest and every member: a member left by another run is refused)")
	fs.StringVar(&bc.compression, "compression", "zstd", "compression of archive members: zstd, gzip or none")
	fs.IntVar(&bc.archiveVer, "archive-version", 0, "archive format version to write: 3 (the default: each database's small members packed), or 2 for sofa releases that read no version 3")
	fs.BoolVar(&bc.force, "force", false, "overwrite an existing archive (never a file that is not a sofa archive)")
	fs.String("config", "", "TOML file of flag values (keys are flag names)")
	return cmd
}

func (bc *backupCmd) run(ctx context.Context, srcURL, path string) error {
	bc.s3.log = bc.out.logf
	if bc.engine.noCheckpoints {
		return usageErr("--no-checkpoints: a backup writes no checkpoint to the source; the seqs it reaches are kept in the archive, for an incremental backup (--since) to continue from")
	}
	comp, err := archive.ParseCompression(bc.compression)
	if err != nil {
		return usageErr("--compression: %w", err)
	}
	if path == "-" && bc.out.jsonOut {
		return usageErr("--json prints the summary on stdout, which carries the archive when ARCHIVE is -")
	}
	shard, err := bc.shard.shard()
	if err != nil {
		return err
	}
	if bc.setID != "" && !shard.Sharded() {
		return usageErr("--set-id names the run of a sharded backup: give --shard i/n too")
	}
	sel := sofa.Selection{Include: bc.include, Exclude: bc.exclude, Skip: sofa.BackupSkip, Shard: shard}
	if err := sel.Validate(); err != nil {
		return err
	}
	var src *sofa.Endpoint
	isAr, err := isArchive(srcURL, "SOURCE")
	if err != nil {
		return err
	}
	// ARCHIVE spelt as a server URL without its scheme is refused
	// before the source is read.
	if _, err := isArchive(path, "ARCHIVE"); err != nil {
		return err
	}
	if !isAr {
		copts := bc.client.options()
		copts.Log = bc.out.logf
		src, err = openEndpoint(ctx, srcURL, "SOURCE", copts, bc.control.newLimiter(hostOf(srcURL)))
	} else {
		src, err = sofa.Open(ctx, srcURL, bc.s3.openOptions()) // an archive: copied into ARCHIVE
	}
	if err != nil {
		return err
	}
	dst, err := sofa.Open(ctx, path, bc.s3.openOptions())
	if err != nil {
		return err
	}
	bc.engine.setMemoryLimit(int64(bc.control.maxDBs) << 20)
	setGCPercent(archiveGCPercent)
	prog := bc.out.progress()
	sum, err := sofa.Backup(ctx, src, dst, sofa.BackupOptions{
		Engine: bc.engine.options(), Selection: sel, Since: bc.since, SetID: bc.setID,
		Compression: comp, ArchiveVersion: bc.archiveVer, Overwrite: bc.force, Tool: "sofa " + version,
		RunControl: bc.control.runControl(&bc.out, prog),
	})
	prog.Stop()
	if sum == nil {
		// nothing ran (the archive or the selection was refused), or the
		// archive could not be written: one line, no summary; an
		// interrupt says so as after a summary (no checkpoints to resume)
		if err != nil && ctx.Err() != nil {
			return &outcome{err: err, interrupted: interruptedArchive(path, "a backup")}
		}
		return err
	}
	// A sharded backup wrote its member, not ARCHIVE: that is named.
	name, label := dst.Archive(), dst.String()
	if shard.Sharded() {
		name, label = sofa.ShardArchiveName(name, shard), sofa.ShardArchiveName(label, shard)
	}
	var arch *archiveDoc
	if code, _ := exitFor(&outcome{sum: sum, err: err}, ctx.Err() != nil); code != exitInterrupted && code != exitFatal && path != "-" {
		if st, err := dst.Store().Stat(ctx, name); err == nil {
			arch = &archiveDoc{Location: label, Bytes: st.Size}
		}
	}
	o := finishDBsInto(sum, err, bc.out, "backed up", interruptedArchive(path, "a backup"), arch)
	if code, _ := exitFor(o, ctx.Err() != nil); code == exitInterrupted || code == exitFatal {
		return o
	}
	if !bc.out.quiet && !bc.out.jsonOut {
		printDeletedSince(os.Stderr, sum.DeletedSincePrevious, bc.since, label)
	}
	if !bc.out.quiet && arch != nil {
		fmt.Fprintf(os.Stderr, "sofa: archive %s written (%s)\n", escapeControls(label), humanBytes(arch.Bytes))
	}
	if shard.Sharded() && bc.setID == "" && !bc.out.quiet {
		fmt.Fprintln(os.Stderr, "sofa: warning: --shard without --set-id: a member an earlier run left beside this run's cannot be told apart from them; give the run's workers one --set-id (a new one each run)")
	}
	return o
}
