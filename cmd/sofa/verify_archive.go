package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/archive"
)

func isURL(s string) bool { return sofa.IsURL(s) }

// verifyArchive checks an archive alone: every member's checksum, the
// decompressed sizes, the references between records and blobs, and the
// manifest. Exit 0 when sound, 1 (naming the damaged member) when not.
func (vc *verifyCmd) verifyArchive(ctx context.Context, path string) error {
	f, err := vc.s3.openArchive(ctx, path)
	if err != nil {
		return err
	}
	defer f.Close()
	rep, err := archive.Verify(f, nil)
	if err != nil {
		return fatal(fmt.Errorf("%s: %w", path, err))
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
	b, err := openEndpoint(ctx, url, "TARGET", vc.client.forRole("TARGET", copts), nil)
	if err != nil {
		return err
	}
	a, err := sofa.Open(ctx, path, vc.s3.openOptions())
	if err != nil {
		return libErr(err)
	}
	res, err := sofa.Verify(ctx, a, b, vc.options(true, cmd))
	if err != nil {
		return libErr(err)
	}
	vc.print(os.Stdout, os.Stderr, res)
	return vc.exit(ctx, res)
}
