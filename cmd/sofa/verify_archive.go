package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sofadb/sofa"
)

func isURL(s string) bool { return sofa.IsURL(s) }

// verifyArchive checks an archive alone: every member's checksum, the
// decompressed sizes, the references between records and blobs, and the
// manifest. Exit 0 when sound, 1 (naming the damaged member) when not.
func (vc *verifyCmd) verifyArchive(ctx context.Context, path string) error {
	ep, err := sofa.Open(ctx, path, vc.s3.openOptions())
	if err != nil {
		return err
	}
	sum, err := sofa.CheckArchives(ctx, ep)
	if err != nil {
		return fatal(err)
	}
	vc.printChecks(sum.Archives, false)
	if rep := sum.Archives[0].Report; vc.jsonOut && rep != nil {
		printJSON(os.Stdout, rep)
	}
	if sum.Status != sofa.ArchivesSound || vc.jsonOut {
		return &outcome{archives: sum}
	}
	if !vc.quiet {
		rep := sum.Archives[0].Report
		fmt.Fprintf(os.Stderr, "sofa: archive %s is sound: %s, %d revisions, %d members, every checksum and the manifest check out\n",
			escapeControls(path), countDBs(len(rep.Databases)), rep.Revisions, rep.Members)
	}
	return nil
}

// verifyArchiveAgainst compares each database of an archive with the
// database of the same name on a server (or with the one database of a
// database URL), as the archive recorded it.
func (vc *verifyCmd) verifyArchiveAgainst(ctx context.Context, cmd *cobra.Command, path, url string) error {
	copts := vc.client.options()
	copts.Log = vc.out().logf
	b, err := openEndpoint(ctx, url, "TARGET", vc.client.forRole("TARGET", copts), nil)
	if err != nil {
		return err
	}
	a, err := sofa.Open(ctx, path, vc.s3.openOptions())
	if err != nil {
		return err
	}
	res, err := sofa.Verify(ctx, a, b, vc.options(true, cmd))
	if err != nil {
		return err
	}
	vc.print(os.Stdout, os.Stderr, res)
	return &outcome{verify: res}
}

// verifySet checks every present member of a sharded backup's set as
// verifyArchive does (rest empty), or compares them with the server rest[0].
func (vc *verifyCmd) verifySet(ctx context.Context, cmd *cobra.Command, set *sofa.ArchiveSet, rest []string) error {
	for _, m := range set.Missing {
		fmt.Fprintf(os.Stderr, "sofa: warning: member %s of the set is missing (--allow-partial): it is not checked\n", m)
	}
	if len(rest) == 1 {
		copts := vc.client.options()
		copts.Log = vc.out().logf
		b, err := openEndpoint(ctx, rest[0], "TARGET", vc.client.forRole("TARGET", copts), nil)
		if err != nil {
			return err
		}
		res, err := sofa.VerifySet(ctx, set, b, vc.options(true, cmd))
		if err != nil {
			return err
		}
		vc.print(os.Stdout, os.Stderr, res)
		return &outcome{verify: res, missing: set.Missing}
	}
	sets, sum, err := vc.checkSets(ctx, []*sofa.ArchiveSet{set})
	if err != nil {
		return err
	}
	if vc.jsonOut {
		printJSON(os.Stdout, sets[0])
	}
	if sum.Status != sofa.ArchivesSound {
		return &outcome{archives: sum, missing: set.Missing}
	}
	if !vc.quiet && !vc.jsonOut {
		if len(set.Missing) > 0 {
			fmt.Fprintf(os.Stderr, "sofa: set %s: the %d members present of %d are sound (%s; every checksum and manifest checks out); %d missing, not checked\n",
				escapeControls(set.Manifest), len(set.Members), set.Count, countDBs(sum.Databases), len(set.Missing))
		} else {
			fmt.Fprintf(os.Stderr, "sofa: set %s is sound: %d of %d members, %s; every member's checksums and manifest check out\n",
				escapeControls(set.Manifest), len(set.Members), set.Count, countDBs(sum.Databases))
		}
	}
	if len(set.Missing) > 0 {
		return &outcome{missing: set.Missing}
	}
	return nil
}

// checkedSet is one set's check, as --json prints it.
type checkedSet struct {
	Set         string              `json:"set"`
	Count       int                 `json:"count"`
	SetID       string              `json:"set_id,omitempty"`
	Incremental bool                `json:"incremental,omitempty"`
	Missing     []string            `json:"missing,omitempty"`
	Members     []sofa.ArchiveCheck `json:"members"`
}

// printChecks prints, unless --json, the incomplete databases of each
// archive checked and (inChain: one of several) what is wrong with it.
func (vc *verifyCmd) printChecks(checks []sofa.ArchiveCheck, inChain bool) {
	if vc.jsonOut {
		return
	}
	// The worst one's error is the run's last line (see outcome): it is
	// not printed twice.
	last := (&sofa.ArchivesCheck{Archives: checks}).Worst()
	for _, c := range checks {
		if c.Report != nil {
			for _, db := range c.Report.Databases {
				if db.Error != "" {
					fmt.Fprintf(os.Stderr, "sofa: archive %s: database %q is incomplete: %s\n", c.Location, db.Name, db.Error)
				}
			}
		}
		if inChain && c.Error != "" && c.Error != last {
			fmt.Fprintf(os.Stderr, "sofa: %s\n", c.Error)
		}
	}
}

// checkSets checks every present member of each set alone, as one run
// (sum), and splits the checks by set for --json.
func (vc *verifyCmd) checkSets(ctx context.Context, sets []*sofa.ArchiveSet) ([]checkedSet, *sofa.ArchivesCheck, error) {
	var members []*sofa.Endpoint
	for _, set := range sets {
		members = append(members, set.Members...)
	}
	sum, err := sofa.CheckArchives(ctx, members...)
	if err != nil {
		return nil, nil, fatal(err)
	}
	vc.printChecks(sum.Archives, true)
	var out []checkedSet
	rest := sum.Archives
	for _, set := range sets {
		out = append(out, checkedSet{Set: set.Manifest, Count: set.Count, SetID: set.SetID, Incremental: set.Incremental, Missing: set.Missing,
			Members: rest[:len(set.Members)]})
		rest = rest[len(set.Members):]
	}
	return out, sum, nil
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
	var sum *sofa.ArchivesCheck
	var printed any
	what := ""
	if chain == nil {
		if sum, err = sofa.VerifyChain(ctx, archs...); err != nil {
			return err
		}
		vc.printChecks(sum.Archives, true)
		printed = map[string]any{"chain": sum.Archives}
		what = fmt.Sprintf("chain of %d archives (%s)", len(archs), strings.Join(paths, ", "))
	} else {
		for _, m := range chain.Missing {
			fmt.Fprintf(os.Stderr, "sofa: warning: member %s of the set is missing (--allow-partial): it is not checked, nor the chain of its shard\n", m)
		}
		var sets []checkedSet
		if sets, sum, err = vc.checkSets(ctx, chain.Sets); err != nil {
			return err
		}
		printed = map[string]any{"sets": sets}
		what = fmt.Sprintf("chain of %d sets of %d shards (%s)", len(chain.Sets), chain.Count, strings.Join(paths, ", "))
	}
	if vc.jsonOut {
		printJSON(os.Stdout, printed)
	}
	var missing []string
	if chain != nil {
		missing = chain.Missing
	}
	if sum.Status != sofa.ArchivesSound {
		return &outcome{archives: sum, missing: missing}
	}
	if !vc.quiet && !vc.jsonOut {
		partial := ""
		if len(missing) > 0 {
			partial = fmt.Sprintf(", as far as present; %d of the set's members missing, not checked", len(missing))
		}
		fmt.Fprintf(os.Stderr, "sofa: %s is sound: every link continues the archive before it, every checksum and manifest check out (%d database groups)%s\n", what, sum.Databases, partial)
	}
	if len(missing) > 0 {
		return &outcome{missing: missing}
	}
	return nil
}
