package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/verify"
)

func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// verifyArchive checks an archive alone: every member's checksum, the
// decompressed sizes, the references between records and blobs, and the
// manifest. Exit 0 when sound, 1 (naming the damaged member) when not.
func (vc *verifyCmd) verifyArchive(path string) error {
	f, err := openArchive(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rep, err := archive.Verify(f, nil)
	if err != nil {
		return fatal(fmt.Errorf("%s: %v", path, err))
	}
	var incomplete []string
	for _, db := range rep.Databases {
		if db.Error != "" {
			incomplete = append(incomplete, db.Name)
			if !vc.jsonOut {
				fmt.Fprintf(os.Stderr, "sofa: archive %s: database %q is incomplete: %s\n", path, db.Name, db.Error)
			}
		}
	}
	if vc.jsonOut {
		printJSON(os.Stdout, rep)
	}
	if len(incomplete) > 0 {
		// Intact, but the backup did not hold everything: not sound.
		return &exitError{code: exitPartial, err: fmt.Errorf("archive %s is intact but incomplete: %d of %d databases were not backed up completely", path, len(incomplete), len(rep.Databases))}
	}
	if vc.jsonOut {
		return nil
	}
	if !vc.quiet {
		fmt.Fprintf(os.Stderr, "sofa: archive %s is sound: %d databases, %d revisions, %d members, every checksum and the manifest check out\n",
			path, len(rep.Databases), rep.Revisions, rep.Members)
	}
	return nil
}

// verifyArchiveAgainst compares each database of an archive with the
// database of the same name on a server (or with the one database of a
// database URL), as the archive recorded it.
func (vc *verifyCmd) verifyArchiveAgainst(ctx context.Context, cmd *cobra.Command, path, url string) error {
	copts := vc.client.options()
	b, err := openEndpoint(ctx, url, "TARGET", vc.client.forRole("TARGET", copts))
	if err != nil {
		return err
	}
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
	if h := rd.Header(); h.Since != nil {
		// Its databases hold only what changed after the archive before
		// it: compared alone with a database they would differ everywhere.
		return usageErr("%s is an incremental archive (it continues archive %s): it holds only the changes since then, so it cannot be compared with a database alone; restore the chain and compare the copy (sofa verify SOURCE COPY), or check its checksums with sofa verify %s", path, h.Since.ArchiveID, path)
	}
	o := vc.options(b.Server, true, cmd)
	var res verifyResult
	for {
		dbr, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fatal(fmt.Errorf("%s: %v", path, err))
		}
		name := dbr.Name()
		if b.DBName != "" {
			if res.DBsTotal > 0 {
				return usageErr("%s holds several databases: compare it with a server URL", path)
			}
			name = b.DBName
		}
		sp, err := verify.NewSpooled(dbr, "")
		if err != nil {
			return fatal(err)
		}
		res.add(dbOutcome(ctx, dbr.Name(), sp, b.Server.DB(name), o))
		sp.Close()
		if ctx.Err() != nil {
			res.Interrupted = true
			break
		}
	}
	vc.print(os.Stdout, os.Stderr, &res)
	return vc.exit(ctx, &res)
}
