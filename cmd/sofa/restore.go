package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/storage"
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
	replace        bool
	withReplicator bool
	allowPartial   bool
	q, n           int
	verifyMode     string
	compression    string
	archiveVer     int
	force          bool
	archiveFlags   bool // --compression, --archive-version or --force given
	s3             s3Flags
}

func newRestoreCmd() *cobra.Command {
	c := &restoreCmd{}
	cmd := &cobra.Command{
		Use:   "restore ARCHIVE... TARGET",
		Short: "Restore archives (a full one and its incrementals, in order) into a server, a database or one new archive",
		Long: `Restore the databases of an archive into TARGET, a server URL (every
database under its own name, or --rename OLD=NEW) or a database URL (an
archive holding one database, or --include selecting one). Several archives
are a chain: a full archive, then its incrementals in order; archives that
do not form a chain are refused. ARCHIVE - reads stdin; s3://BUCKET/KEY
is read in place with ranged GETs.

Databases are created with their original properties (partitioned; q and n
only with --q/--n), _revs_limit is set first, design documents are written
after the other documents and _security last. _users is restored;
_replicator only with --with-replicator or an --include pattern that
starts with "_" and names it (its documents would start replications on
the target); both are written into the ones the target
server created itself. A non-empty target database is refused unless
--reuse-existing, or an earlier run of this restore claimed it (a killed
restore resumes: run the same command again). In a chain, a database
recreated at the source between two backups is restored from the archive
that holds it in full.

Databases of an archive file are restored many at once under the adaptive
controller (--max-dbs, --fixed, --ideal-duration), each read at its own
offset: a damaged member fails its database only (exit code 1 still).
ARCHIVE - is restored in order, one database after the other, and stops
at a damaged member. In a chain each database's archives apply in order.
Attachments an archive refers to again later are kept in memory up to a
share of --max-inflight-bytes; past it, an archive file reads them again
at their offsets, while stdin and s3:// spill them to a temporary file in
TMPDIR (as much space as those attachments).

A restore only adds revisions: over an existing database holding newer
revisions (--reuse-existing) the newer ones stay the winners, and the
result says so per database ("ok with warnings", with the number of
documents whose winning revision is not the archive's). To roll a
database back to the archive, use --replace: it DELETES each existing
target database the restore selects (every document, revision, attachment
and _local checkpoint in it is lost), recreates it with the same
partitioned flag, q and n (unless --q/--n) and _security, and restores
into it; the archive's _security, when it holds one, is set last as in
every restore. Before deleting a database, --replace reads that
database's part of the archive (of each archive of a chain) through and
checks it: a damaged part fails the database and leaves it as it was. So
--replace takes an archive file or s3:// object, not stdin, and refuses
an archive whose index is damaged. Before deleting a database it prints
what the database holds (replacing "db" on the target: deleting it (12
documents, 3 deleted)); --json lists them as replaced. Interrupted, it
says what a rerun does: the same command deletes each existing database
again and restores it from the start; without --replace, the databases
it recreated resume. _users and _replicator are never deleted: they are
written into. --replace and --reuse-existing cannot be given together.

The set of a sharded backup (backup --shard) is restored as one archive:
name its manifest (NAME.set.json) or the ARCHIVE the backup was given. A
chain of sets (the full set, then the sets of backup --shard i/n --since)
is restored as a chain, shard by shard. A set missing a member is refused
unless --allow-partial (then the shards with a member missing anywhere in
the chain are left out, the run exits 3, and --json lists the members as
missing_members); a member of another run or of another number of shards
is always refused.

TARGET may also be an archive (a path, - for stdout, or s3://BUCKET/KEY):
the chain is then consolidated into that one full archive (--compression,
--force), which restored into a server gives what the chain restored there
gives; a database deleted at the source between the backups is left out,
one not whole in the chain stays marked not whole. It records the source
server and each database's seqs and checkpoints of the chain's last
archive: backup --since NEW.sofa continues it. _replicator is kept (an
archive starts no replication) unless --exclude leaves it out.
--replace, --reuse-existing, --q and --n need a server TARGET; --verify is
ignored (each database is checked by the revisions stored).

` + exitCodesHelp,
		Example: `  sofa restore full.sofa http://admin:pw@new:5984
  sofa restore full.sofa inc1.sofa inc2.sofa http://admin:pw@new:5984
  sofa restore s3://backups/full.sofa s3://backups/inc1.sofa http://admin:pw@new:5984
  sofa restore orders.sofa http://admin:pw@new:5984 --rename orders=orders-copy
  sofa restore backup.set.json http://admin:pw@new:5984   # every member of a sharded backup
  sofa restore full.set.json inc1.set.json http://admin:pw@new:5984   # a chain of sets
  ssh elsewhere 'cat orders.sofa' | sofa restore - http://admin:pw@new:5984/orders
  sofa restore full.sofa inc1.sofa inc2.sofa merged.sofa   # one full archive of the chain`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageErr("restore needs ARCHIVE... and TARGET (got %s)", arguments(len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := configure(cmd, &c.engine); err != nil {
				return err
			}
			c.archiveFlags = cmd.Flags().Changed("compression") || cmd.Flags().Changed("force") || cmd.Flags().Changed("archive-version")
			return c.run(cmd.Context(), args[:len(args)-1], args[len(args)-1])
		},
	}
	fs := cmd.Flags()
	c.engine.register(fs)
	// 0 picks per target (sofa.RestoreOptions.Engine) once the target has answered.
	c.engine.workers = 0
	if f := fs.Lookup("workers"); f != nil {
		f.DefValue = "0"
		f.Usage = fmt.Sprintf("batches in flight at once per database (0: %d into CouchDB, %d into PouchDB Server, %d into others)", sofa.CouchDBRestoreWorkers, sofa.PouchDBRestoreWorkers, replicate.DefaultWorkers)
	}
	c.client.register(fs)
	c.control.register(fs)
	fs.Lookup("max-dbs").Usage = "most databases restored at once (0: the default)"
	registerOutput(fs, &c.out)
	c.s3.register(fs, &c.client.retryTime)
	fs.StringArrayVar(&c.include, "include", nil, "restore only databases matching this glob (repeatable; shell-style: * and ? do not match /, [!a-c] negates a class)")
	fs.StringArrayVar(&c.exclude, "exclude", nil, "skip databases matching this glob (repeatable; wins over --include)")
	fs.StringArrayVar(&c.renames, "rename", nil, "restore database OLD under the name NEW (OLD=NEW, repeatable; two selected databases restored into one target database are refused)")
	fs.BoolVar(&c.reuseExisting, "reuse-existing", false, "write into existing non-empty target databases (adds revisions; newer ones stay the winners)")
	fs.BoolVar(&c.replace, "replace", false, "DELETE each existing target database (all its documents) and recreate it with the same properties and _security before restoring into it, once its part of the archive is checked: rolls it back to the archive")
	fs.BoolVar(&c.withReplicator, "with-replicator", false, "also restore _replicator (its documents start replications on the target)")
	fs.BoolVar(&c.allowPartial, "allow-partial", false, "restore the members of a sharded backup's set that are present when some are missing")
	fs.IntVar(&c.q, "q", 0, "shards (q) of created databases (0: the target's default)")
	fs.IntVar(&c.n, "n", 0, "replicas (n) of created databases (0: the target's default)")
	fs.StringVar(&c.verifyMode, "verify", "none", "check each database after restoring it: none, cheap (doc counts against those the archive recorded; on a mismatch every document is compared, the database restored once more, and each remaining difference reported), full (compare every document and leaf revision with the archive, same retry); the target may hold more than the archive (documents or revisions of its own are not differences: sofa verify --full ARCHIVE TARGET lists them); an archive read from stdin is checked by its counts only")
	fs.StringVar(&c.compression, "compression", "zstd", "with an archive TARGET: compression of its members: zstd, gzip or none")
	fs.IntVar(&c.archiveVer, "archive-version", 0, "with an archive TARGET: format version to write, 3 (the default) or 2 (see backup --help)")
	fs.BoolVar(&c.force, "force", false, "with an archive TARGET: overwrite an existing archive (never a file that is not a sofa archive)")
	fs.String("config", "", "TOML file of flag values (keys are flag names)")
	return cmd
}

func (c *restoreCmd) run(ctx context.Context, paths []string, tgtURL string) error {
	c.s3.log = c.out.logf
	if c.replace && c.reuseExisting {
		return usageErr("--replace and --reuse-existing exclude each other: --replace deletes and recreates existing databases, --reuse-existing writes into them")
	}
	renames := map[string]string{}
	for _, r := range c.renames {
		old, nu, ok := strings.Cut(r, "=")
		if !ok || old == "" || nu == "" {
			return usageErr("--rename %q: want OLD=NEW", r)
		}
		if prev, ok := renames[old]; ok && prev != nu {
			return usageErr("--rename %s=%s and --rename %s=%s: one database takes one new name", old, prev, old, nu)
		}
		renames[old] = nu
	}
	// A TARGET that is a server URL without its scheme is refused
	// before any archive is read.
	if _, err := isArchive(tgtURL, "TARGET"); err != nil {
		return err
	}
	archs, chain, err := openArchives(ctx, &c.s3, paths, c.allowPartial)
	if err != nil {
		return err
	}
	if chain != nil {
		for _, m := range chain.Missing {
			fmt.Fprintf(os.Stderr, "sofa: warning: member %s of the set is missing (--allow-partial): the databases of its shard are not restored\n", m)
		}
	}
	comp, err := archive.ParseCompression(c.compression)
	if err != nil {
		return usageErr("--compression: %w", err)
	}
	prog := c.out.progress()
	defer prog.Stop()
	ropts := sofa.RestoreOptions{
		Engine:         c.engine.options(),
		Selection:      sofa.Selection{Include: c.include, Exclude: c.exclude},
		WithReplicator: c.withReplicator, Renames: renames,
		ReuseExisting: c.reuseExisting, Replace: c.replace, Q: c.q, N: c.n,
		Verify:     sofa.VerifyMode(c.verifyMode),
		Output:     sofa.ArchiveOutput{Compression: comp, ArchiveVersion: c.archiveVer, Overwrite: c.force, Tool: "sofa " + version},
		RunControl: c.control.runControl(&c.out, prog),
	}
	if c.replace {
		ropts.Replacing = printReplacing(c.out.quiet)
	}
	var plan *sofa.RestorePlan
	if chain != nil {
		plan, err = sofa.PlanRestoreSets(ctx, chain, ropts)
	} else {
		plan, err = sofa.PlanRestore(ctx, archs, ropts)
	}
	if err != nil {
		return err
	}
	var tgt *sofa.Endpoint
	isAr, err := isArchive(tgtURL, "TARGET")
	if err != nil {
		return err
	}
	if !isAr {
		if c.archiveFlags {
			return usageErr("--compression, --archive-version and --force apply to an archive TARGET, not %s", sofa.Redact(tgtURL))
		}
		copts := c.client.options()
		copts.Log = c.out.logf
		tgt, err = openEndpoint(ctx, tgtURL, "TARGET", copts, c.control.newLimiter(hostOf(tgtURL)))
	} else {
		if tgtURL == "-" && c.out.jsonOut {
			return usageErr("--json prints the summary on stdout, which carries the archive when TARGET is -")
		}
		tgt, err = sofa.Open(ctx, tgtURL, c.s3.openOptions()) // the chain consolidated into one archive
	}
	if err != nil {
		return err
	}
	c.engine.setMemoryLimit(64 << 20)
	setGCPercent(archiveGCPercent)
	sum, err := plan.Run(ctx, tgt)
	prog.Stop()
	interrupted := "" // resumeMsg
	if tgt.Kind() == sofa.KindArchive {
		interrupted = interruptedArchive(tgtURL, "the restore")
	} else if c.replace {
		interrupted = replaceInterrupted(sum)
	}
	o := finishDBs(sum, err, c.out, "restored", interrupted)
	if tgt.Kind() == sofa.KindArchive {
		if code, _ := exitFor(o, ctx.Err() != nil); code != exitInterrupted && code != exitFatal && sum != nil && !c.out.quiet && tgtURL != "-" {
			if st, err := tgt.Store().Stat(ctx, tgt.Archive()); err == nil {
				fmt.Fprintf(os.Stderr, "sofa: archive %s written (%s)\n", escapeControls(tgt.String()), humanBytes(st.Size))
			}
		}
	}
	return o
}

// interruptedArchive is the line of a run writing an archive at path
// that was interrupted (what names the run: "a backup"): a file or an
// object is never written in part; stdout carries what was written
// before the interrupt, which is no archive.
func interruptedArchive(path, what string) string {
	if path == storage.Stdio {
		return "interrupted: the archive on stdout is cut short: discard what was written (" + what + " starts over when run again)"
	}
	return "interrupted: no archive was written (" + what + " starts over when run again)"
}
