package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/archive"
)

func newLsCmd() *cobra.Command {
	var jsonOut bool
	var client clientFlags
	var s3f s3Flags
	cmd := &cobra.Command{
		Use:   "ls ENDPOINT",
		Short: "List the databases of an archive (counts and sizes) or a server (counts)",
		Long: `List the databases of an archive (a file or s3://BUCKET/KEY; from its manifest: documents, revisions
stored, tombstones, attachments, sizes, seq reached; a document changed
while the backup ran is stored at both revisions it read, so revisions may
exceed the leaves), of each member of
a sharded backup's set (its NAME.set.json, or the ARCHIVE the backup was
given; missing members are named) or of a server or
database URL (doc_count, doc_del_count, update_seq). The doc_count of
_users and _replicator leaves out the server's own design document there
(_design/_auth, _design/_replicator), which sofa never copies: it is the
count a copy holds.

` + exitCodesHelp,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr("ls needs one ENDPOINT (got %s)", arguments(len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := applyEnvAndConfig(cmd); err != nil {
				return err
			}
			if isURL(args[0]) {
				return lsServer(cmd.Context(), args[0], client, jsonOut)
			}
			set, err := openSet(cmd.Context(), &s3f, args[0], true)
			if err != nil {
				return err
			}
			if set != nil {
				return lsSet(cmd.Context(), &s3f, set, jsonOut)
			}
			return lsArchive(cmd.Context(), &s3f, args[0], jsonOut)
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON on stdout (a run stopped by an error prints {status, error, exit_code})")
	client.register(cmd.Flags())
	s3f.register(cmd.Flags(), &client.retryTime)
	cmd.Flags().String("config", "", "TOML file of flag values (keys are flag names)")
	return cmd
}

func lsArchive(ctx context.Context, s3f *s3Flags, path string, jsonOut bool) error {
	ep, err := sofa.Open(ctx, path, s3f.openOptions())
	if err != nil {
		return err
	}
	hdr, dbs, err := sofa.ListArchive(ctx, ep)
	if err != nil {
		return fatal(err)
	}
	if jsonOut {
		printJSON(os.Stdout, map[string]any{"header": hdr, "databases": dbs})
		return nil
	}
	kind := "full"
	if hdr.Since != nil {
		kind = "incremental after " + hdr.Since.ArchiveID
	}
	fmt.Printf("archive %s: %s, %s, created %s by %s, compression %s\n", escapeControls(path), hdr.ID, kind, hdr.Created.Format("2006-01-02 15:04:05Z"), hdr.Tool, hdr.Compression)
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	// The seq, last, ends its line unpadded and cut (shortSeq): a CouchDB
	// seq is a long opaque string that made every line wrap.
	fmt.Fprintln(tw, "database\tdocs\tdeleted\trevisions\ttombstones\tattachments\tstored\t seq")
	var incomplete []string
	for _, d := range dbs {
		name := d.Name
		if d.Error != "" {
			// the reason after the table: in it, it widened every row
			name += " (INCOMPLETE)"
			incomplete = append(incomplete, d.Name+": "+d.Error)
		}
		deleted := strconv.FormatInt(d.DelCount, 10)
		if d.DelCountUnknown {
			deleted = "?" // the source (PouchDB Server) did not say
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t %s\n", name, d.DocCount, deleted, d.Revisions, d.Tombstones, d.Attachments, humanBytes(d.StoredBytes), shortSeq(d.Seq.String()))
	}
	err = listed(tw.Flush())
	for _, l := range incomplete {
		fmt.Printf("INCOMPLETE %s\n", l)
	}
	return err
}

func lsServer(ctx context.Context, raw string, client clientFlags, jsonOut bool) error {
	sep, err := openEndpoint(ctx, raw, "SOURCE", client.options(), nil)
	if err != nil {
		return err
	}
	rows, err := sofa.List(ctx, sep)
	if err != nil {
		return fatal(err)
	}
	unread := 0
	for _, r := range rows {
		if r.Error != "" {
			unread++
		}
	}
	if jsonOut {
		printJSON(os.Stdout, rows)
	} else {
		tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "database\tdocs\tdeleted\t update_seq") // last and unpadded, as in lsArchive
		for _, r := range rows {
			if r.Error != "" {
				fmt.Fprintf(tw, "%s\t?\t?\t %s\n", r.Name, "not read: "+r.Error)
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t %s\n", r.Name, r.DocCount, r.DelCount, shortSeq(r.UpdateSeq))
		}
		if err := listed(tw.Flush()); err != nil {
			return err
		}
	}
	if unread > 0 {
		return partialErr("%d of %d databases could not be read (listed)", unread, len(rows))
	}
	return nil
}

// lsSet lists every present member of a set, and names the missing ones.
func lsSet(ctx context.Context, s3f *s3Flags, set *sofa.ArchiveSet, jsonOut bool) error {
	type member struct {
		Archive   string              `json:"archive"`
		Header    archive.Header      `json:"header"`
		Databases []archive.DBSummary `json:"databases"`
	}
	out := struct {
		Set         string   `json:"set"`
		Count       int      `json:"count"`
		SetID       string   `json:"set_id,omitempty"`
		Incremental bool     `json:"incremental,omitempty"`
		Missing     []string `json:"missing,omitempty"`
		Members     []member `json:"members"`
	}{Set: set.Manifest, Count: set.Count, SetID: set.SetID, Incremental: set.Incremental, Missing: set.Missing}
	if !jsonOut {
		kind := "full backups"
		if set.Incremental {
			kind = "incremental backups"
		}
		fmt.Printf("set %s: %d members, %s (set id %q)\n", set.Manifest, set.Count, kind, set.SetID)
		for _, m := range set.Missing {
			fmt.Printf("member %s: MISSING\n", m)
		}
	}
	for _, m := range set.Members {
		if jsonOut {
			hdr, dbs, err := sofa.ListArchive(ctx, m)
			if err != nil {
				return fatal(err)
			}
			out.Members = append(out.Members, member{m.Archive(), hdr, dbs})
			continue
		}
		if err := lsArchive(ctx, s3f, m.String(), false); err != nil {
			return err
		}
	}
	if jsonOut {
		printJSON(os.Stdout, out)
	}
	return nil
}

// listed is the error of writing a listing to stdout, nil when the reader
// went away (sofa ls ... | head): like any Unix lister, ls stops quietly
// when nobody reads the rest. Only stdout's errors come here, never a
// server's.
func listed(err error) error {
	if errors.Is(err, syscall.EPIPE) {
		return nil
	}
	return err
}

// maxSeqShown is the most bytes of a seq a table shows.
const maxSeqShown = 24

// shortSeq is seq as a table shows it: its first maxSeqShown bytes and
// "..." when longer (CouchDB's seqs are 100 bytes and more; --json gives
// them whole).
func shortSeq(seq string) string {
	if len(seq) <= maxSeqShown {
		return seq
	}
	return seq[:maxSeqShown] + "..."
}
