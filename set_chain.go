package sofa

import (
	"context"
	"fmt"
	"strings"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/storage"
)

// Incremental sharded backups. A sharded backup with --since continues,
// shard by shard, an earlier set of the same n: worker i's member holds
// what changed in shard i's databases since that shard's member of the
// earlier set (each member's header links it, Since.ArchiveID, to the
// member it continues). A chain of sets is a full set, then incremental
// sets in order; shard i's chain is its member of each set. Databases
// never move between shards (the hash depends on the name and n alone),
// so the chains are independent and a restore applies them as one.

// A SetChain is a checked chain of sets (see ChainSets).
type SetChain struct {
	// Sets are the sets in chain order: a full one, then incremental ones.
	Sets []*ArchiveSet
	// Count is n, the shards of every set.
	Count int
	// Shards[i] is shard i's chain: its member of each set, in order; nil
	// when a member of it is missing (with SetOptions.AllowPartial: the
	// shard's databases are left out, and Missing names the members).
	Shards [][]*Endpoint
	// Missing are the names of the members missing from the sets.
	Missing []string
}

// ChainSets checks that sets (each from OpenSet) form a chain: the same
// number of shards n, the first a set of full backups, each next one
// incremental, and for every shard its member of each set continuing its
// member of the set before (archive.CheckChain on the members' headers).
// A broken link is an *OptionError naming the shard and both members. A
// shard with a member missing (sets opened with AllowPartial) is left
// out: its chain is nil.
func ChainSets(sets ...*ArchiveSet) (*SetChain, error) {
	if len(sets) == 0 {
		return nil, optionErr("no set")
	}
	for _, s := range sets {
		if s == nil {
			return nil, optionErr("no archive set (nil): open each with sofa.OpenSet")
		}
	}
	n := sets[0].Count
	c := &SetChain{Sets: sets, Count: n, Shards: make([][]*Endpoint, n)}
	for k, s := range sets {
		switch {
		case s.Count != n:
			return nil, optionErr("%s has %d shards, %s has %d: a chain of sets keeps the number of shards (take a full backup to change it)", s.Manifest, s.Count, sets[0].Manifest, n)
		case k == 0 && s.Incremental:
			return nil, optionErr("%s is a set of incremental backups; a chain of sets starts with a set of full backups (give the sets in order)", s.Manifest)
		case k > 0 && !s.Incremental:
			return nil, optionErr("%s is a set of full backups, not an incremental set continuing %s (give the sets in order, the full one first)", s.Manifest, sets[k-1].Manifest)
		}
		c.Missing = append(c.Missing, s.Missing...)
	}
	for i := range n {
		var chain []*Endpoint
		var headers []archive.Header
		for _, s := range sets {
			m := s.Member(i)
			if m == nil {
				chain = nil
				break
			}
			chain = append(chain, m)
			headers = append(headers, s.headers[i])
		}
		if chain == nil {
			continue
		}
		if err := archive.CheckChain(headers...); err != nil {
			return nil, optionErr("shard %d of the chain of sets (%s): %w", i, memberNames(chain), err)
		}
		c.Shards[i] = chain
	}
	return c, nil
}

func memberNames(eps []*Endpoint) string {
	names := make([]string, len(eps))
	for i, e := range eps {
		names[i] = e.archive
	}
	return strings.Join(names, ", ")
}

// PlanRestoreSets plans the restore of a chain of sets (see ChainSets)
// into one target: every shard's chain applied as a chain of archives
// is (Restore), all shards as one restore. A database absent from the
// last set's member of its shard was deleted at the source (or left out
// of the later backups) and is not restored, as for a chain of archives.
// Nothing selected across the sets is an error (unless
// Selection.Sharded).
func PlanRestoreSets(ctx context.Context, c *SetChain, o RestoreOptions) (*RestorePlan, error) {
	if c == nil {
		return nil, optionErr("no chain of archive sets (nil): make one with sofa.ChainSets")
	}
	defaultSkip := o.Selection.Skip == nil && !o.WithReplicator
	o, filter, err := o.check()
	if err != nil {
		return nil, err
	}
	// The archives set by set, each set's members in shard order: every
	// database's archives come in chain order.
	var archives []*Endpoint
	chains := make([][]int, c.Count)
	for k := range c.Sets {
		for i, chain := range c.Shards {
			if chain == nil {
				continue
			}
			chains[i] = append(chains[i], len(archives))
			archives = append(archives, chain[k])
		}
	}
	if len(archives) == 0 {
		return nil, fmt.Errorf("restore: no member of set %s is present", c.Sets[0].Manifest)
	}
	p := &RestorePlan{archives: archives, c: &restorer{o: o}, filter: filter, missing: c.Missing, defaultSkip: defaultSkip}
	if len(c.Sets) > 1 {
		var present [][]int
		for _, ch := range chains {
			if ch != nil {
				present = append(present, ch)
			}
		}
		if _, p.fullFrom, p.gone, err = chainStates(ctx, archives, present); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// CheckChain reads the headers of archives (not sets) and refuses them,
// with an *OptionError saying which link is broken, unless they form a
// chain: a full archive, then incrementals in order, each continuing the
// one before it. It reads no member beyond the headers and manifests.
func CheckChain(ctx context.Context, archives ...*Endpoint) error {
	if err := opened(archives...); err != nil {
		return err
	}
	for _, a := range archives {
		if a.Kind() != KindArchive || a.archive == storage.Stdio {
			return optionErr("%s is not an archive file or object", a)
		}
	}
	_, _, err := checkChain(ctx, archives)
	return err
}

// shardSince resolves the --since of a backup of shard sh to the archive
// it continues: the member of shard sh of the set name names (its
// manifest, or the ARCHIVE name of the sharded backup), or name itself
// when it is that member. Anything else (a set of another n, a member of
// another shard, an archive that is no member) is an *OptionError.
func shardSince(ctx context.Context, st storage.Store, name string, sh Shard) (string, error) {
	ep := &Endpoint{location: Redact(name), archive: name, store: st}
	if IsSet(ctx, ep) {
		set, err := OpenSet(ctx, ep, SetOptions{AllowPartial: true})
		if err != nil {
			return "", err
		}
		if set.Count != sh.Count {
			return "", optionErr("--since %s: that set has %d shards, this backup is shard %s: an incremental sharded backup continues a set of the same number of shards (take a full backup to change it)", Redact(name), set.Count, sh)
		}
		m := set.Member(sh.Index)
		if m == nil {
			return "", fmt.Errorf("--since %s: its member of shard %d (%s) is missing: there is nothing for this shard to continue: put it back, or start a new chain with a full sharded backup of every shard (a set's members are all full or all incremental)", Redact(name), sh.Index, Redact(set.locs[sh.Index]))
		}
		return m.archive, nil
	}
	h, err := readHeader(ctx, ep)
	if err != nil {
		return "", err
	}
	switch {
	case h.Shard == nil:
		return "", optionErr("--since %s is not a member of a sharded backup: a sharded incremental backup continues the member of its own shard of an earlier set (or that set's manifest)", Redact(name))
	case h.Shard.Count != sh.Count || h.Shard.Index != sh.Index:
		return "", optionErr("--since %s is shard %d/%d; this backup is shard %s: give the member of shard %d of the earlier set, or the set (its manifest)", Redact(name), h.Shard.Index, h.Shard.Count, sh, sh.Index)
	}
	return name, nil
}
