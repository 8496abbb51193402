package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/sofadb/sofa"
)

// shardFlag is --shard i/n of the whole-server verbs.
type shardFlag struct{ raw string }

func (s *shardFlag) register(fs *pflag.FlagSet, what string) {
	fs.StringVar(&s.raw, "shard", "", "server mode: "+what+" only shard i of n (i/n, 0 <= i < n): the databases whose name's FNV-1a 64 hash modulo n is i; n workers given 0/n .. n-1/n cover every database exactly once (an empty shard succeeds)")
}

// shard parses the flag (a usage error when malformed or out of range).
func (s *shardFlag) shard() (sofa.Shard, error) {
	sh, err := sofa.ParseShard(s.raw)
	if err != nil {
		return sofa.Shard{}, err
	}
	return sh, nil
}

// openSet opens the archive set named by path (its manifest or the
// ARCHIVE name of the sharded backup) when path names one; nil, nil
// otherwise.
func openSet(ctx context.Context, s3f *s3Flags, path string, allowPartial bool) (*sofa.ArchiveSet, error) {
	ep, err := sofa.Open(ctx, path, s3f.openOptions())
	if err != nil {
		return nil, err
	}
	if !sofa.IsSet(ctx, ep) {
		return nil, nil
	}
	set, err := sofa.OpenSet(ctx, ep, sofa.SetOptions{AllowPartial: allowPartial})
	if err != nil {
		return nil, err
	}
	warnSetSpread(set)
	return set, nil
}

// maxSetSpread is the spread of a set's member starts (ArchiveSet.Spread)
// above which a set without a set id is warned of.
const maxSetSpread = 10 * time.Minute

// warnSetSpread warns when a set without a set id has members whose
// backups started far apart: one may be left by another run.
func warnSetSpread(set *sofa.ArchiveSet) {
	if d := set.Spread(); set.SetID == "" && d > maxSetSpread {
		fmt.Fprintf(os.Stderr, "sofa: warning: set %s has no set id and its members' backups started up to %s apart: check that none is left from another run (give a run's workers one --set-id to have such a member refused)\n",
			set.Manifest, d.Round(time.Minute))
	}
}

// openArchives opens the archives of a restore or a chain check: plain
// archives (a chain), or sets of sharded backups (a chain of sets: the
// full set, then incremental ones), never a mix. chain is nil for plain
// archives.
func openArchives(ctx context.Context, s3f *s3Flags, paths []string, allowPartial bool) ([]*sofa.Endpoint, *sofa.SetChain, error) {
	var archs []*sofa.Endpoint
	var sets []*sofa.ArchiveSet
	for _, p := range paths {
		a, err := sofa.Open(ctx, p, s3f.openOptions())
		if err != nil {
			return nil, nil, err
		}
		if sofa.IsSet(ctx, a) {
			set, err := sofa.OpenSet(ctx, a, sofa.SetOptions{AllowPartial: allowPartial})
			if err != nil {
				return nil, nil, err
			}
			warnSetSpread(set)
			sets = append(sets, set)
		}
		archs = append(archs, a)
	}
	switch {
	case len(sets) == 0:
		return archs, nil, nil
	case len(sets) != len(paths):
		return nil, nil, usageErr("give a chain of archives or a chain of sets, not both: %d of the %d are sets of sharded backups", len(sets), len(paths))
	}
	chain, err := sofa.ChainSets(sets...)
	if err != nil {
		return nil, nil, err
	}
	return archs, chain, nil
}
