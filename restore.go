package sofa

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/replicate"
)

// RestoreOptions configure Restore.
type RestoreOptions struct {
	// Engine are the one-database engine's options; Workers zero picks
	// per target (CouchDBRestoreWorkers into CouchDB,
	// PouchDBRestoreWorkers into PouchDB Server).
	Engine replicate.Options
	// Selection picks the archives' databases (Skip: _replicator unless
	// WithReplicator, when nil). Nothing selected is an error unless
	// Selection.Sharded.
	Selection Selection
	// WithReplicator also restores _replicator (its documents start
	// replications on the target).
	WithReplicator bool
	// Renames restores database OLD under the name NEW. Two selected
	// databases restored into one target database (two OLD with one
	// NEW; a NEW that names another selected database not renamed
	// away; names the target server keeps as one, see
	// couch.Server.StoredAs) are refused with an *OptionError naming
	// both and the target, before anything is written (from stdin, read
	// once: when the second is reached, which stops the restore).
	Renames map[string]string
	// ReuseExisting writes into existing non-empty target databases
	// (adds revisions; newer ones stay the winners).
	ReuseExisting bool
	// Replace DELETES each existing target database the restore selects
	// (but _users and _replicator) and recreates it with the same
	// properties and _security before restoring into it. Before deleting
	// one, the restore reads that database's part of every archive of
	// the chain through and checks it (members, records, attachments): a
	// damaged part fails the database and leaves it as it was. Archives
	// that can only be read in order (stdin, or a file whose index is
	// damaged) cannot be checked first: Replace refuses them (an
	// *OptionError for stdin, the archive's damage error otherwise)
	// before anything is deleted.
	Replace bool
	// Replacing, when not nil, is called before each database Replace
	// deletes, with what it holds (from the restore's goroutines, several
	// at once); the Summary lists those deleted in Replaced.
	Replacing func(fleet.Replaced)
	// Q and N are the shards and replicas of created databases.
	Q, N int
	// Verify checks each database after it is restored ("": VerifyNone,
	// no request added): VerifyCheap compares the target's doc counts
	// with those the archive recorded at backup time, and on a mismatch
	// every document as VerifyFull does; VerifyFull compares every
	// document and leaf revision with the archive, restores a database
	// found different once more and reports what still differs. An
	// archive read in order (stdin) cannot be read twice: its databases
	// are checked by their counts only.
	Verify VerifyMode
	// Output configures the archive written when the target is an
	// archive (RestorePlan.Run into an archive: the chain consolidated
	// into one full archive); ignored for a server or database target.
	Output ArchiveOutput
	// RunControl: databases at once (from an archive that can be read
	// at offsets; from stdin one after the other), progress and logs.
	RunControl
}

type restorer struct {
	o      RestoreOptions
	budget *replicate.Budget
	// onTarget, when not nil, is the target's databases listed at the
	// start: one missing is created without being asked for.
	onTarget *targetListing
	// archived holds every database name of the archives (checkSelection).
	archived map[string]bool
	// parts, set by runIndexed, opens each part of the chain that
	// restores a target database (checkParts).
	parts func(target string) []archivePart
	// replaced are the databases Replace deleted (recreate).
	replacedMu sync.Mutex
	replaced   []fleet.Replaced
}

// Restore restores a chain of archives (a full one, then its
// incrementals in order; archives that do not form a chain are refused
// with an *OptionError) into dst, a server (every database under its own
// name, or Renames), a database (the one selected database) or an
// archive (the chain consolidated into one full archive: see
// RestorePlan.Run). Archive
// headers and manifests are read before anything is written (but from
// stdin, read once). Databases are created with their archived
// properties, claimed before any document, `_revs_limit` set first,
// design documents written after the others and `_security` last. A
// database recreated at the source between two backups is restored from
// the archive that holds it in full.
//
// The Summary, when not nil, holds one result per database (a chain's
// archives merged); the error says why the restore stopped (a damaged
// archive, an interruption: it then matches ctx.Err()), or that nothing
// was selected.
func Restore(ctx context.Context, archives []*Endpoint, dst *Endpoint, o RestoreOptions) (*Summary, error) {
	if err := opened(append([]*Endpoint{dst}, archives...)...); err != nil {
		return nil, err
	}
	p, err := PlanRestore(ctx, archives, o)
	if err != nil {
		return nil, err
	}
	return p.Run(ctx, dst)
}

// A RestorePlan is a restore whose options and chain of archives were
// checked, before any target is contacted.
type RestorePlan struct {
	archives []*Endpoint
	c        *restorer
	filter   fleet.Filter
	fullFrom map[string]int
	// gone holds, per database of a chain absent from the chain's last
	// archive, the last archive holding it and the chain's last.
	gone map[string]goneDB
	// defaultSkip: the options left _replicator out by default (a
	// server target only: an archive target keeps it).
	defaultSkip bool
	// verb names the operation in errors ("restore"; "backup" for a
	// backup from an archive).
	verb string
	// missing are the members of the sets planned that are missing
	// (SetChain.Missing), reported in the Summary.
	missing []string
}

// PlanRestore checks a restore's options and reads the archives' headers
// (and, for a chain, manifests): archives that do not form a chain are
// refused (an *OptionError).
func PlanRestore(ctx context.Context, archives []*Endpoint, o RestoreOptions) (*RestorePlan, error) {
	if err := opened(archives...); err != nil {
		return nil, err
	}
	if len(archives) == 0 {
		return nil, optionErr("restore: no archive")
	}
	for _, a := range archives {
		if a.Kind() != KindArchive {
			return nil, optionErr("restore: %s is not an archive", a)
		}
	}
	defaultSkip := o.Selection.Skip == nil && !o.WithReplicator
	o, filter, err := o.check()
	if err != nil {
		return nil, err
	}
	fullFrom, gone, err := checkChain(ctx, archives)
	if err != nil {
		return nil, err
	}
	return &RestorePlan{archives: archives, c: &restorer{o: o}, filter: filter, fullFrom: fullFrom, gone: gone, defaultSkip: defaultSkip}, nil
}

// check validates the options and fills their defaults.
func (o RestoreOptions) check() (RestoreOptions, fleet.Filter, error) {
	if err := checkRun(o.RunControl, o.Engine, o.Q, o.N); err != nil {
		return o, fleet.Filter{}, err
	}
	if o.Replace && o.ReuseExisting {
		return o, fleet.Filter{}, optionErr("--replace and --reuse-existing exclude each other: --replace deletes and recreates existing databases, --reuse-existing writes into them")
	}
	switch o.Verify {
	case "":
		o.Verify = VerifyNone
	case VerifyCheap, VerifyFull, VerifyNone:
	default:
		return o, fleet.Filter{}, optionErr("--verify %q: want cheap, full or none", o.Verify)
	}
	if o.Selection.Shard.Sharded() {
		return o, fleet.Filter{}, optionErr("--shard %s: a restore takes the set of a sharded backup, not a shard", o.Selection.Shard)
	}
	if o.Selection.Skip == nil && !o.WithReplicator {
		o.Selection.Skip = []string{"_replicator"}
	}
	filter := o.Selection.filter()
	if err := filter.Validate(); err != nil {
		return o, filter, &OptionError{Err: err}
	}
	// Two renames to one name, before any archive is read (stdin's
	// too); checkSelection checks every selected name against the
	// target.
	var renamed []string
	for old := range o.Renames {
		if filter.Match(old) {
			renamed = append(renamed, old)
		}
	}
	if err := distinctTargets(nil, o.Renames, "restored", renamed); err != nil {
		return o, filter, err
	}
	return o, filter, nil
}

// PlanRestoreSet plans the restore of a set of archives (see OpenSet):
// every present member, each a full archive of its shard's databases,
// into one target, as if they were one archive. Nothing selected across
// the set is an error (unless Selection.Sharded); a member that holds
// no selected database is none. It is PlanRestoreSets of the one set.
func PlanRestoreSet(ctx context.Context, set *ArchiveSet, o RestoreOptions) (*RestorePlan, error) {
	if set == nil {
		return nil, optionErr("no archive set (nil): open one with sofa.OpenSet")
	}
	chain, err := ChainSets(set)
	if err != nil {
		return nil, err
	}
	return PlanRestoreSets(ctx, chain, o)
}

// Run restores the planned archives into dst (see Restore). dst may
// also be an archive (a path, "-" or s3://): the chain is then
// consolidated into that one full archive (see runIntoArchive), whose
// restore into a server gives what the chain's restore gives.
func (p *RestorePlan) Run(ctx context.Context, dst *Endpoint) (*Summary, error) {
	if p == nil {
		return nil, optionErr("no restore plan (nil): make one with sofa.PlanRestore")
	}
	if err := opened(dst); err != nil {
		return nil, err
	}
	if dst.Kind() == KindArchive {
		return p.runIntoArchive(ctx, dst)
	}
	c := &restorer{o: p.c.o, budget: replicate.NewBudget(p.c.o.Engine.MaxInflightBytes)}
	o, archives := c.o, p.archives
	tgt := dst.couch
	// The target's databases are listed while the archives' catalogs
	// and indexes are read; the databases do not wait for the listing
	// (see targetListing).
	if tgt.DBName == "" {
		var endListing func()
		c.onTarget, endListing = listTargetLater(ctx, tgt.Server, &c.o.RunControl)
		defer endListing()
	}
	selected, damaged, err := c.checkSelection(ctx, archives, p.filter, o.Renames, tgt.DBName != "", tgt.Server)
	if err != nil {
		return nil, err
	}
	c.o.Engine.Workers = restoreWorkers(o.Engine.Workers, tgt.Server.Vendor)
	skip := p.skip()
	var sum fleet.Summary
	nWarning := replicasWarning(ctx, tgt.Server, o.N)
	if nWarning != "" {
		c.o.logf("warning: %s", nWarning)
	}
	var fatalErr error
	var idx []*archive.Index
	closeAll := func() {}
	if damaged == nil {
		idx, closeAll, err = c.indexes(ctx, archives)
		if err != nil {
			return nil, err
		}
	} else {
		// Its index cannot be trusted, or its end is missing: the
		// archives are read in order, as from stdin, and what comes
		// before the damage restored.
		c.o.logf("%v: restoring in order what comes before the damage", damaged)
	}
	if idx == nil && o.Replace {
		return nil, replaceInOrder(damaged)
	}
	if idx != nil {
		defer closeAll()
		sum, fatalErr = c.runIndexed(ctx, archives, idx, skip, dst, p.filter)
	} else {
		sum, fatalErr = c.runInOrder(ctx, archives, selected, skip, tgt, p.filter)
	}
	if tgt.DBName == "" {
		sum.LeftOut = p.leftOut(c.archived)
	}
	sum.Replaced = c.replacedDBs()
	if nWarning != "" {
		sum.Warnings = append(sum.Warnings, nWarning)
	}
	return p.finish(&sum, fatalErr, p.filter)
}

// replaceInOrder is the refusal of Replace for archives read in order:
// a database is deleted before its part is read, so a damaged part
// would leave it deleted and not restored. damaged is the archive's
// damage when its index could not be trusted (nil: stdin).
func replaceInOrder(damaged error) error {
	if damaged != nil {
		return fmt.Errorf("%w: --replace deletes each database before restoring it and checks the database's part of the archive first, which this archive, readable only in order up to its damage, does not allow: nothing was deleted (restore without --replace, or from a sound copy)", damaged)
	}
	return optionErr("--replace needs an archive read at its offsets (a file or s3:// object): each database's part is read and checked before the existing database is deleted, which an archive read in order, as from stdin, cannot be (save it to a file first)")
}

// leftOut lists the archived databases the default selection left out of
// a restore into a server: _replicator, unless WithReplicator or a Skip
// of the caller's own (its documents would start replications on the
// target).
func (p *RestorePlan) leftOut(archived map[string]bool) []fleet.LeftOut {
	if !p.defaultSkip {
		return nil
	}
	o := p.c.o
	loose := fleet.Filter{Include: o.Selection.Include, Exclude: o.Selection.Exclude}
	var out []fleet.LeftOut
	for _, name := range slices.Sorted(maps.Keys(archived)) {
		if loose.Match(name) && !p.filter.Match(name) {
			out = append(out, fleet.LeftOut{Name: name, Reason: "its documents would start replications on the target; --with-replicator restores it"})
		}
	}
	return out
}

// skip says from which archive of the chain each database is restored
// (index into the archives; those not named: from the first). A
// database absent from the last archive of the chain was deleted at the
// source (or left out of that backup): the restore gives the state as of
// the last archive, so it is not restored (len(archives): in none).
func (p *RestorePlan) skip() map[string]int {
	skip := maps.Clone(p.fullFrom)
	if skip == nil {
		skip = map[string]int{}
	}
	for name := range p.gone {
		skip[name] = len(p.archives)
	}
	return skip
}

// anyGone reports whether filter selects a database of the chain absent
// from its last archive.
func (p *RestorePlan) anyGone(filter fleet.Filter) bool {
	for name := range p.gone {
		if filter.Match(name) {
			return true
		}
	}
	return false
}

// finish completes the Summary of a run: a chain's results merged per
// database, the databases absent from the chain's last archive listed in
// LeftOut (not restored, in no count: the source deleted them, or the
// later backups left them out), the duration. It returns fatalErr, or the
// error of a run that selected nothing.
func (p *RestorePlan) finish(sum *fleet.Summary, fatalErr error, filter fleet.Filter) (*Summary, error) {
	o, archives := p.c.o, p.archives
	if len(archives) > 1 {
		mergeChainResults(sum)
	}
	gone := 0
	for _, name := range slices.Sorted(maps.Keys(p.gone)) {
		if !filter.Match(name) {
			continue
		}
		gone++
		tname := name
		if nu, ok := o.Renames[name]; ok {
			tname = nu
		}
		g := p.gone[name]
		msg := fmt.Sprintf("deleted at the source since %s (or left out of the later backups' selection): %s, the last archive of the chain, does not hold it; restore the archives up to %s to get it back",
			archives[g.last].archive, archives[g.end].archive, archives[g.last].archive)
		o.logf("%s: not restored: %s", tname, msg)
		sum.Add(fleet.DBResult{Name: tname, Status: fleet.StatusLeftOut, Error: msg})
	}
	sum.Duration = fleet.Duration(time.Since(sum.Started))
	sum.MissingMembers = p.missing
	if fatalErr != nil {
		return sum, fatalErr
	}
	if err := o.Selection.noneMatched(sum.DBsTotal+gone, "no database of the archive was selected"); err != nil {
		return sum, err
	}
	return sum, nil
}

// targetName is the name database name of an archive is restored under:
// dbName, the target database's, when not "" (a database URL).
func (c *restorer) targetName(name string, dbName string) string {
	if dbName != "" {
		return dbName
	}
	if nu, ok := c.o.Renames[name]; ok {
		return nu
	}
	return name
}

// mergeChainResults folds the results of a chain's archives into one per
// database (counters summed, failures and warnings kept, the worst status)
// and recounts the summary, so that a database restored from three
// archives counts once.
func mergeChainResults(s *fleet.Summary) {
	var order []string
	byName := map[string]*fleet.DBResult{}
	for _, r := range s.DBs {
		if m, ok := byName[r.Name]; ok {
			m.Merge(r)
			continue
		}
		r := r
		byName[r.Name] = &r
		order = append(order, r.Name)
	}
	merged := fleet.Summary{Started: s.Started, Duration: s.Duration, Interrupted: s.Interrupted, TotalUnknown: s.TotalUnknown, ArchiveNotWritten: s.ArchiveNotWritten,
		LeftOut: s.LeftOut, Replaced: s.Replaced, MissingMembers: s.MissingMembers, Hosts: s.Hosts, Concurrency: s.Concurrency, RequestsByKind: s.RequestsByKind}
	for _, name := range order {
		merged.Add(*byName[name])
	}
	*s = merged
}
