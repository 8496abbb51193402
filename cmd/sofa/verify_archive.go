package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/archive"
)

func isURL(s string) bool { return sofa.IsURL(s) }

// verifyArchive checks an archive alone: every member's checksum, the
// decompressed sizes, the references between records and blobs, and the
// manifest. Exit 0 when sound, 1 (naming the damaged member) when not.
func (vc *verifyCmd) verifyArchive(ctx context.Context, path string) error {
	rep, err := vc.checkArchive(ctx, path)
	if vc.jsonOut && rep != nil {
		printJSON(os.Stdout, rep)
	}
	if err != nil || vc.jsonOut {
		return err
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

// verifySet checks every present member of a sharded backup's set as
// verifyArchive does (rest empty), or compares them with the server rest[0].
func (vc *verifyCmd) verifySet(ctx context.Context, cmd *cobra.Command, set *sofa.ArchiveSet, rest []string) error {
	for _, m := range set.Missing {
		fmt.Fprintf(os.Stderr, "sofa: warning: member %s of the set is missing (--allow-partial): it is not checked\n", m)
	}
	if len(rest) == 1 {
		copts := vc.client.options()
		b, err := openEndpoint(ctx, rest[0], "TARGET", vc.client.forRole("TARGET", copts), nil)
		if err != nil {
			return err
		}
		res, err := sofa.VerifySet(ctx, set, b, vc.options(true, cmd))
		if err != nil {
			return libErr(err)
		}
		vc.print(os.Stdout, os.Stderr, res)
		return vc.exit(ctx, res)
	}
	out, dbs, worst := vc.checkSet(ctx, set)
	if vc.jsonOut {
		printJSON(os.Stdout, out)
	}
	if worst != nil {
		return worst
	}
	if !vc.quiet && !vc.jsonOut {
		fmt.Fprintf(os.Stderr, "sofa: set %s is sound: %d of %d members, %d databases; every member's checksums and manifest check out\n",
			set.Manifest, len(set.Members), set.Count, dbs)
	}
	return nil
}

// checkedArchive is one archive's check, as --json prints it.
type checkedArchive struct {
	Archive string          `json:"archive"`
	Report  *archive.Report `json:"report,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// checkedSet is one set's check, as --json prints it.
type checkedSet struct {
	Set         string           `json:"set"`
	Count       int              `json:"count"`
	SetID       string           `json:"set_id,omitempty"`
	Incremental bool             `json:"incremental,omitempty"`
	Missing     []string         `json:"missing,omitempty"`
	Members     []checkedArchive `json:"members"`
}

// checkArchives checks each archive alone (see checkArchive), printing
// each failure unless --json; worst is the failure whose exit code wins
// (fatal first), dbs the databases of the sound ones.
func (vc *verifyCmd) checkArchives(ctx context.Context, eps []*sofa.Endpoint) (out []checkedArchive, dbs int, worst error) {
	for _, m := range eps {
		rep, err := vc.checkArchive(ctx, m.String())
		out = append(out, checkedArchive{Archive: m.Archive(), Report: rep})
		if err != nil {
			out[len(out)-1].Error = err.Error()
			if !vc.jsonOut {
				fmt.Fprintf(os.Stderr, "sofa: %v\n", err)
			}
			if worst == nil || codeOf(err) == exitFatal {
				worst = err
			}
			continue
		}
		dbs += len(rep.Databases)
	}
	return out, dbs, worst
}

// checkSet checks every present member of set alone.
func (vc *verifyCmd) checkSet(ctx context.Context, set *sofa.ArchiveSet) (checkedSet, int, error) {
	out := checkedSet{Set: set.Manifest, Count: set.Count, SetID: set.SetID, Incremental: set.Incremental, Missing: set.Missing}
	members, dbs, worst := vc.checkArchives(ctx, set.Members)
	out.Members = members
	return out, dbs, worst
}

// verifyChain checks a chain of archives (a full one, then incrementals
// in order) or of sets (the full set, then incremental sets): every
// archive or member alone, as verifyArchive does, and that they form a
// chain (for sets, shard by shard), as restore checks before it writes.
func (vc *verifyCmd) verifyChain(ctx context.Context, paths []string) error {
	archs, chain, err := openArchives(ctx, &vc.s3, paths, vc.allowPartial)
	if err != nil {
		return err
	}
	var worst error
	var printed any
	what := ""
	dbs := 0
	if chain == nil {
		if err := sofa.CheckChain(ctx, archs...); err != nil {
			return libErr(err)
		}
		var out []checkedArchive
		out, dbs, worst = vc.checkArchives(ctx, archs)
		printed = map[string]any{"chain": out}
		what = fmt.Sprintf("chain of %d archives (%s)", len(archs), strings.Join(paths, ", "))
	} else {
		for _, m := range chain.Missing {
			fmt.Fprintf(os.Stderr, "sofa: warning: member %s of the set is missing (--allow-partial): it is not checked, nor the chain of its shard\n", m)
		}
		var sets []checkedSet
		for _, set := range chain.Sets {
			out, n, err := vc.checkSet(ctx, set)
			sets = append(sets, out)
			dbs += n
			if err != nil && (worst == nil || codeOf(err) == exitFatal) {
				worst = err
			}
		}
		printed = map[string]any{"sets": sets}
		what = fmt.Sprintf("chain of %d sets of %d shards (%s)", len(chain.Sets), chain.Count, strings.Join(paths, ", "))
	}
	if vc.jsonOut {
		printJSON(os.Stdout, printed)
	}
	if worst != nil {
		return worst
	}
	if !vc.quiet && !vc.jsonOut {
		fmt.Fprintf(os.Stderr, "sofa: %s is sound: every link continues the archive before it, every checksum and manifest check out (%d database groups)\n", what, dbs)
	}
	return nil
}

// checkArchive checks one archive (see verifyArchive), saying which of
// its databases are incomplete; the error carries the exit code.
func (vc *verifyCmd) checkArchive(ctx context.Context, path string) (*archive.Report, error) {
	ep, err := sofa.Open(ctx, path, vc.s3.openOptions())
	if err != nil {
		return nil, libErr(err)
	}
	rep, err := sofa.CheckArchive(ctx, ep)
	if err != nil {
		return nil, fatal(err)
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
	if len(incomplete) > 0 {
		// Intact, but the backup did not hold everything: not sound.
		return rep, &exitError{code: exitPartial, err: fmt.Errorf("archive %s is intact but incomplete: %d of %d databases were not backed up completely", path, len(incomplete), len(rep.Databases))}
	}
	return rep, nil
}
