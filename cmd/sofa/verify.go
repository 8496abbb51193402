package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/verify"
)

type verifyCmd struct {
	client       clientFlags
	control      controlFlags
	full         bool
	metadata     bool
	maxDiffs     int
	jsonOut      bool
	quiet        bool
	verbose      bool
	debug        bool
	include      []string
	exclude      []string
	shard        shardFlag
	allowPartial bool
	withUsers    bool
	withRepl     bool
	s3           s3Flags
}

func newVerifyCmd() *cobra.Command {
	vc := &verifyCmd{}
	cmd := &cobra.Command{
		Use:   "verify A [B]",
		Short: "Compare two databases or servers, check an archive, or compare an archive with a server",
		Long: `Compare A with B: the same documents with the same leaf revisions. A and B are both
database URLs, or both server URLs: then every database of A (selected by
--include and --exclude as for replicate) is compared with the database of
the same name on B, many at once under the adaptive concurrency controller.

The default comparison is cheap: doc_count and doc_del_count, and from
_changes?style=all_docs the same document ids, per id the same leaf
revisions and the same deleted state. --full also reads every leaf revision
from both sides and compares its body as canonical JSON, its history, and
its attachments' digest, content_type, length and revpos. Where the
digests differ, both attachments' bytes are read and their decoded content
compared: the same content stored plain on one server and gzip-compressed
by the other (CouchDB compresses compressible types on write, as its
[attachments] settings say) has two digests and counts as equal. Where
either side is PouchDB Server, which resets an attachment's revpos to the
generation of the revision that carries its bytes, that revpos is accepted. --metadata also compares
_security, _revs_limit and the partitioned property; it is on for server
URLs.

Every difference is listed by database, document id and revision (the
first --max-differences per database; the count covers all).

With one argument, an ARCHIVE (a file, or s3://BUCKET/KEY read in place): check every member's checksum, the
decompressed sizes, the references between revisions and attachments and
the manifest. With ARCHIVE and a URL: compare each database of the archive
with the database of the same name on that server (or the one database of
a database URL), as above.

With several ARCHIVEs (a full one, then its incrementals in order): check
each alone as above, and that they form a chain (each continues the one
before it), as a restore of them would.

The set of a sharded backup (backup --shard) is checked, or compared with a
server, as one archive: name its manifest (NAME.set.json) or the ARCHIVE the
backup was given. A chain of sets (the full set, then incremental sets) is
checked member by member and shard by shard. A set missing a member is
refused unless --allow-partial, which checks the members present and exits
3 (not everything was checked).

` + exitCodesHelp,
		Example: `  sofa verify http://admin:pw@old:5984/orders http://admin:pw@new:5984/orders --full
  sofa verify backup.sofa
  sofa verify s3://backups/full.sofa --s3-endpoint http://minio:9000 --s3-path-style
  sofa verify backup.sofa http://admin:pw@new:5984 --full
  sofa verify full.sofa inc1.sofa inc2.sofa
  sofa verify full.set.json inc1.set.json
  sofa verify http://admin:pw@old:5984 http://admin:pw@new:5984 --exclude 'tmp-*' --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 && slices.ContainsFunc(args, isURL) || len(args) == 1 && isURL(args[0]) {
				return usageErr("verify needs two URLs A and B, an ARCHIVE, an ARCHIVE and a URL, or a chain of ARCHIVEs (got %s)", arguments(len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := applyEnvAndConfig(cmd); err != nil {
				return err
			}
			vc.s3.log = vc.out().logf
			if _, err := vc.shard.shard(); err != nil {
				return err
			}
			if vc.shard.raw != "" && (len(args) == 1 || !isURL(args[0])) {
				return usageErr("--shard: a sharded verify compares two server URLs")
			}
			if len(args) >= 2 && !slices.ContainsFunc(args, isURL) {
				return vc.verifyChain(cmd.Context(), args)
			}
			if !isURL(args[0]) {
				set, err := openSet(cmd.Context(), &vc.s3, args[0], vc.allowPartial)
				if err != nil {
					return err
				}
				if set != nil {
					return vc.verifySet(cmd.Context(), cmd, set, args[1:])
				}
			}
			switch {
			case len(args) == 1:
				return vc.verifyArchive(cmd.Context(), args[0])
			case !isURL(args[0]):
				return vc.verifyArchiveAgainst(cmd.Context(), cmd, args[0], args[1])
			}
			return vc.run(cmd.Context(), cmd, args[0], args[1])
		},
	}
	fs := cmd.Flags()
	vc.client.register(fs, "source", "target")
	vc.control.register(fs)
	fs.Lookup("max-dbs").Usage = "most databases compared at once (0: the default)"
	vc.s3.register(fs, &vc.client.retryTime)
	fs.BoolVar(&vc.full, "full", false, "also compare every leaf revision's body, history and attachment metadata")
	fs.BoolVar(&vc.metadata, "metadata", false, "also compare _security, _revs_limit and the partitioned property (default: on for server URLs)")
	fs.IntVar(&vc.maxDiffs, "max-differences", verify.DefaultMaxDifferences, "differences listed per database (all are counted; 0 or less: the default)")
	fs.BoolVar(&vc.jsonOut, "json", false, "print the result as JSON on stdout (a run stopped by an error prints {status, error, exit_code})")
	fs.BoolVarP(&vc.quiet, "quiet", "q", false, "print nothing but errors and differences")
	fs.BoolVarP(&vc.verbose, "verbose", "v", false, "log retries, waits and controller decisions")
	fs.BoolVar(&vc.debug, "debug", false, "log more (as --verbose, at debug level)")
	fs.String("config", "", "TOML file of flag values (keys are flag names)")
	fs.StringArrayVar(&vc.include, "include", nil, "server mode, and ARCHIVE with a URL: compare only databases matching this glob (repeatable; shell-style: * and ? do not match /, [!a-c] negates a class; an indexed archive is read only where they are)")
	fs.StringArrayVar(&vc.exclude, "exclude", nil, "server mode, and ARCHIVE with a URL: skip databases matching this glob (repeatable; wins over --include)")
	vc.shard.register(fs, "compare")
	fs.BoolVar(&vc.allowPartial, "allow-partial", false, "check the members of a sharded backup's set that are present when some are missing")
	fs.BoolVar(&vc.withRepl, "with-replicator", false, "ARCHIVE with a server URL: also compare the archive's _replicator (left out by default, as restore leaves it out)")
	fs.BoolVar(&vc.withUsers, "with-users", false, "server mode: also compare _users, with or without --include; _replicator and _global_changes are skipped unless named by --include")
	return cmd
}

type verifyResult = sofa.VerifySummary

// options are the comparison options; metadataDefault turns --metadata
// on unless given (server URLs, archives).
func (vc *verifyCmd) options(metadataDefault bool, cmd *cobra.Command) sofa.VerifyOptions {
	o := verify.Options{Mode: verify.Cheap, Metadata: vc.metadata, MaxDifferences: vc.maxDiffs}
	if vc.full {
		o.Mode = verify.Full
	}
	if !cmd.Flags().Changed("metadata") && metadataDefault {
		o.Metadata = true
	}
	o.Partitioned = o.Metadata
	return sofa.VerifyOptions{Compare: o,
		Selection:      sofa.Selection{Include: usersIncluded(vc.include, vc.withUsers), Exclude: vc.exclude, Skip: sofa.WithoutUsers(sofa.ReplicateSkip, vc.withUsers), Shard: vc.mustShard()},
		WithReplicator: vc.withRepl,
		RunControl:     vc.control.runControl(vc.out(), nil)}
}

// out is what verify prints besides its result: logs under -v/--debug.
func (vc *verifyCmd) out() *outputFlags {
	return &outputFlags{jsonOut: vc.jsonOut, quiet: vc.quiet, verbose: vc.verbose, debug: vc.debug}
}

func (vc *verifyCmd) run(ctx context.Context, cmd *cobra.Command, aURL, bURL string) error {
	if l := strings.ToLower(bURL); !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") {
		return usageErr("%q is not a server or database URL: to compare an archive with a server, give the archive first (sofa verify ARCHIVE SERVER)", sofa.Redact(bURL))
	}
	sl, tl := vc.control.limiters(aURL, bURL)
	copts := vc.client.options()
	copts.Log = vc.out().logf
	a, err := openEndpoint(ctx, aURL, "SOURCE", vc.client.forRole("SOURCE", copts), sl)
	if err != nil {
		return err
	}
	b, err := openEndpoint(ctx, bURL, "TARGET", vc.client.forRole("TARGET", copts), tl)
	if err != nil {
		return err
	}
	servers := a.Kind() == sofa.KindServer && b.Kind() == sofa.KindServer
	res, err := sofa.Verify(ctx, a, b, vc.options(servers, cmd))
	if err != nil {
		return err
	}
	vc.print(os.Stdout, os.Stderr, res)
	return &outcome{verify: res}
}

func (vc *verifyCmd) print(stdout, stderr io.Writer, res *verifyResult) {
	if vc.jsonOut {
		printJSON(stdout, res)
		return
	}
	for _, d := range res.DBs {
		switch d.Status {
		case "equal":
			if !vc.quiet && res.DBsTotal == 1 {
				fmt.Fprintf(stderr, "sofa: database %q: %s\n", d.Name, d.Report)
			}
			continue
		case "different":
			fmt.Fprintf(stderr, "sofa: database %q: %s\n", d.Name, d.Report)
			for _, x := range d.Report.Differences {
				fmt.Fprintf(stderr, "sofa:   %s\n", x)
			}
			if n := d.Report.Truncated(); n > 0 {
				fmt.Fprintf(stderr, "sofa:   ... and %d more (raise --max-differences to list them)\n", n)
			}
		default:
			fmt.Fprintf(stderr, "sofa: database %q: %s", d.Name, d.Status)
			if d.Error != "" {
				fmt.Fprintf(stderr, ": %s", d.Error)
			}
			fmt.Fprintln(stderr)
		}
	}
	if !vc.quiet {
		for _, l := range res.LeftOut {
			fmt.Fprintf(stderr, "sofa: database %q not compared: %s\n", l.Name, l.Reason)
		}
	}
	if !vc.quiet && res.DBsTotal > 1 {
		notCompared := ""
		if n := res.DBsTotal - res.DBsEqual - res.DBsDiffer - res.DBsFailed; n > 0 {
			notCompared = fmt.Sprintf(", %d not compared", n) // an interrupted run: counted in the total
		}
		fmt.Fprintf(stderr, "sofa: %s compared: %d equal, %d different, %d failed%s\n", countDBs(res.DBsTotal), res.DBsEqual, res.DBsDiffer, res.DBsFailed, notCompared)
	}
}

// mustShard is --shard, checked when the command started.
func (vc *verifyCmd) mustShard() sofa.Shard {
	sh, _ := vc.shard.shard()
	return sh
}
