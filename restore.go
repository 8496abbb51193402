package sofa

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/dbcopy"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/storage"
)

// RestoreOptions configure Restore.
type RestoreOptions struct {
	// Engine are the one-database engine's options; Workers zero picks
	// per target (fewer into PouchDB Server).
	Engine replicate.Options
	// Selection picks the archives' databases (Skip: _replicator unless
	// WithReplicator, when nil). Nothing selected is an error unless
	// Selection.Sharded.
	Selection Selection
	// WithReplicator also restores _replicator (its documents start
	// replications on the target).
	WithReplicator bool
	// Renames restores database OLD under the name NEW.
	Renames map[string]string
	// ReuseExisting writes into existing non-empty target databases
	// (adds revisions; newer ones stay the winners).
	ReuseExisting bool
	// Replace DELETES each existing target database the restore selects
	// (but _users and _replicator) and recreates it with the same
	// properties and _security before restoring into it.
	Replace bool
	// Q and N are the shards and replicas of created databases.
	Q, N int
	// RunControl: databases at once (from an archive that can be read
	// at offsets; from stdin one after the other), progress and logs.
	RunControl
}

type restorer struct {
	o      RestoreOptions
	budget *replicate.Budget
	// onTarget, when not nil, holds the target's databases listed at
	// the start: one missing is created without being asked for.
	onTarget map[string]bool
}

// Restore restores a chain of archives (a full one, then its
// incrementals in order; archives that do not form a chain are refused
// with an *OptionError) into dst, a server (every database under its own
// name, or Renames) or a database (the one selected database). Archive
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
	// gone holds, per database of the chain absent from its last
	// archive, the index of the last archive holding it.
	gone map[string]int
}

// PlanRestore checks a restore's options and reads the archives' headers
// (and, for a chain, manifests): archives that do not form a chain are
// refused (an *OptionError).
func PlanRestore(ctx context.Context, archives []*Endpoint, o RestoreOptions) (*RestorePlan, error) {
	if len(archives) == 0 {
		return nil, optionErr("restore: no archive")
	}
	for _, a := range archives {
		if a.Kind() != KindArchive {
			return nil, optionErr("restore: %s is not an archive", a)
		}
	}
	if o.Replace && o.ReuseExisting {
		return nil, optionErr("--replace and --reuse-existing exclude each other: --replace deletes and recreates existing databases, --reuse-existing writes into them")
	}
	if o.Selection.Skip == nil && !o.WithReplicator {
		o.Selection.Skip = []string{"_replicator"}
	}
	filter := o.Selection.filter()
	if err := filter.Validate(); err != nil {
		return nil, &OptionError{Err: err}
	}
	fullFrom, gone, err := checkChain(ctx, archives)
	if err != nil {
		return nil, err
	}
	return &RestorePlan{archives: archives, c: &restorer{o: o}, filter: filter, fullFrom: fullFrom, gone: gone}, nil
}

// Run restores the planned archives into dst (see Restore).
func (p *RestorePlan) Run(ctx context.Context, dst *Endpoint) (*Summary, error) {
	if dst.Kind() == KindArchive {
		return nil, optionErr("restore: %s is an archive, not a server or database", dst)
	}
	c := &restorer{o: p.c.o, budget: replicate.NewBudget(p.c.o.Engine.MaxInflightBytes)}
	o, archives := c.o, p.archives
	tgt := dst.couch
	selected, err := c.checkSelection(ctx, archives, p.filter, o.Renames, tgt.DBName != "")
	if err != nil {
		return nil, err
	}
	c.o.Engine.Workers = restoreWorkers(o.Engine.Workers, tgt.Server.Vendor)
	// A database absent from the last archive of the chain was deleted at
	// the source (or left out of that backup): the restore gives the
	// state as of the last archive, so it is not restored.
	skip := maps.Clone(p.fullFrom)
	for name := range p.gone {
		skip[name] = len(archives)
	}
	if tgt.DBName == "" {
		if names, err := fleet.ListDBs(ctx, tgt.Server, 1000); err == nil {
			c.onTarget = make(map[string]bool, len(names))
			for _, n := range names {
				c.onTarget[n] = true
			}
		} else {
			c.o.logf("target: list databases: %v (asking for each database instead)", err)
		}
	}
	var sum fleet.Summary
	var fatalErr error
	idx, closeAll, err := c.indexes(ctx, archives)
	if err != nil {
		return nil, err
	}
	if idx != nil {
		defer closeAll()
		sum, fatalErr = c.runIndexed(ctx, archives, idx, skip, dst, p.filter)
	} else {
		sum, fatalErr = c.runInOrder(ctx, archives, selected, skip, tgt, p.filter)
	}
	if len(archives) > 1 {
		mergeChainResults(&sum)
	}
	for _, name := range slices.Sorted(maps.Keys(p.gone)) {
		if !p.filter.Match(name) {
			continue
		}
		tname := name
		if nu, ok := o.Renames[name]; ok {
			tname = nu
		}
		msg := fmt.Sprintf("not restored: deleted at the source since %s (or left out of the later backups' selection): %s, the last archive of the chain, does not hold it; restore the archives up to %s to get it back",
			archives[p.gone[name]].archive, archives[len(archives)-1].archive, archives[p.gone[name]].archive)
		c.o.logf("%s: %s", tname, msg)
		sum.Add(fleet.DBResult{Name: tname, Status: fleet.StatusOK, Warnings: []string{msg}})
	}
	sum.Duration = fleet.Duration(time.Since(sum.Started))
	switch {
	case fatalErr != nil:
		return &sum, fatalErr
	case sum.DBsTotal == 0 && !o.Selection.Sharded:
		return &sum, errors.New("no database of the archive was selected")
	}
	return &sum, nil
}

// runInOrder restores the archives one after the other, each database
// after the one before it in archive order: for archives that can only be
// read in order (stdin). A damaged archive stops it: every selected
// database it did not reach is listed not_started.
func (c *restorer) runInOrder(ctx context.Context, archives []*Endpoint, selected [][]string, skip map[string]int, tgt *couch.Endpoint, filter fleet.Filter) (fleet.Summary, error) {
	o := c.o
	sum := fleet.Summary{Started: time.Now()}
	var fatalErr error
	for i, a := range archives {
		done := map[string]bool{}
		if err := c.restoreArchive(ctx, a, i, skip, tgt, filter, o.Renames, &sum, done); err != nil {
			fatalErr = err
			// Every selected database the restore did not reach is
			// listed: "not started" (from this archive on).
			for j := i; j < len(archives) && selected != nil; j++ {
				for _, name := range selected[j] {
					if done[name] {
						continue
					}
					if from, ok := skip[name]; ok && j < from {
						continue
					}
					sum.Add(fleet.DBResult{Name: c.targetName(name, tgt), Status: fleet.StatusNotStarted,
						Error: fmt.Sprintf("not restored from %s: the restore stopped before it", archives[j].archive)})
				}
				done = nil
			}
			break
		}
	}
	return sum, fatalErr
}

// targetName is the name database name of an archive is restored under.
func (c *restorer) targetName(name string, tgt *couch.Endpoint) string {
	if tgt.DBName != "" {
		return tgt.DBName
	}
	if nu, ok := c.o.Renames[name]; ok {
		return nu
	}
	return name
}

// groupIndex locates the database groups of archive a, to read several
// at once at their offsets: nil (and no error) when a can only be read in
// order. The one place restore looks up offsets: an index stored with the
// archive would be read here.
func groupIndex(ctx context.Context, a *Endpoint, o *archive.ReaderOptions) (*archive.Index, io.Closer, error) {
	if a.archive == storage.Stdio {
		return nil, nil, nil
	}
	f, err := a.store.Open(ctx, a.archive)
	if err != nil {
		return nil, nil, err
	}
	// unknown size, or an object store (a ranged GET per tar header
	// and per small read: 1,099 requests against 2 for a 9 MiB archive
	// read in order)
	if f.Size() < 0 || storage.PrefersSequential(f) {
		f.Close()
		return nil, nil, nil
	}
	x, err := archive.Scan(f, f.Size(), o)
	if err != nil {
		f.Close()
		// A damaged archive is read in order: that reader names the
		// first damaged member (a scan sees a mismatched manifest only)
		// and restores what comes before it.
		if ae := (*archive.Error)(nil); errors.Is(err, storage.ErrNotSeekable) || errors.As(err, &ae) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("%s: %w", a.archive, err)
	}
	return x, f, nil
}

// indexes returns the group index of every archive of the chain, or nil
// when one of them can only be read in order.
func (c *restorer) indexes(ctx context.Context, archives []*Endpoint) ([]*archive.Index, func(), error) {
	var idx []*archive.Index
	var files []io.Closer
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	// Each database read at once keeps its own attachment blobs: the
	// restore's blob memory is shared out among them.
	dbs := c.o.MaxDBs
	if dbs <= 0 {
		dbs = DefaultMaxDBs
	}
	// The members they hold at once (a doc chunk, stored and decompressed,
	// each) are capped as well: a quarter of the in-flight budget, at
	// least 16 MiB.
	ropts := &archive.ReaderOptions{BlobMemory: max(c.blobMemory()/int64(dbs), 1), MemberMemory: max(c.inflight()/4, 16<<20)}
	for _, a := range archives {
		x, f, err := groupIndex(ctx, a, ropts)
		if err != nil || x == nil {
			closeAll()
			return nil, nil, err
		}
		idx = append(idx, x)
		files = append(files, f)
	}
	return idx, closeAll, nil
}

// blobMemory is the attachment bytes archive readers keep for later
// references, counted against the in-flight budget: a quarter of it, at
// most the archive default.
func (c *restorer) blobMemory() int64 {
	return min(archive.DefaultBlobMemory, max(c.inflight()/4, 1))
}

// inflight is the engine's in-flight budget in bytes.
func (c *restorer) inflight() int64 {
	if n := c.o.Engine.MaxInflightBytes; n > 0 {
		return n
	}
	return replicate.DefaultMaxInflightBytes
}

// runIndexed restores the databases of indexed archives many at once
// under the scheduler, each database's groups in chain order. A damaged
// group fails its database only (the manifest was checked by the index;
// every other group is checked as it is read); the error then names the
// first damage.
func (c *restorer) runIndexed(ctx context.Context, archives []*Endpoint, idx []*archive.Index, skip map[string]int, dst *Endpoint, filter fleet.Filter) (fleet.Summary, error) {
	type step struct {
		arch int
		g    archive.Group
	}
	var names []string
	steps := map[string][]step{}
	for i, x := range idx {
		for _, g := range x.Groups() {
			if !filter.Match(g.Name) {
				continue
			}
			if from, ok := skip[g.Name]; ok && i < from {
				continue // recreated at the source later in the chain, or gone
			}
			tname := c.targetName(g.Name, dst.couch)
			if _, ok := steps[tname]; !ok {
				names = append(names, tname)
			}
			steps[tname] = append(steps[tname], step{i, g})
		}
	}
	var mu sync.Mutex
	var damage error
	tsrv := dst.couch.Server
	job := func(ctx context.Context, tname string, p DBProgress) (fleet.DBResult, error) {
		r := fleet.DBResult{Name: tname}
		for _, st := range steps[tname] {
			path := archives[st.arch].archive
			rr, err := func() (fleet.DBResult, error) {
				dbr, err := idx[st.arch].OpenDB(st.g)
				if err != nil {
					return fleet.DBResult{}, err
				}
				defer dbr.Close()
				return c.restoreDB(ctx, dbr, tsrv, tname, st.arch > 0 && len(st.g.Since) > 0, p)
			}()
			r.Merge(rr)
			if ae := (*archive.Error)(nil); errors.As(err, &ae) {
				err = fmt.Errorf("%s: %w", path, err)
				mu.Lock()
				if damage == nil {
					damage = err
				}
				mu.Unlock()
			}
			if err != nil {
				return r, err // a chain stops at its first failure
			}
		}
		return r, nil
	}
	sum, err := c.o.runDBs(ctx, names, job, NewStallWatch(dst).Waiting, dst)
	if err != nil {
		return sum, fmt.Errorf("restore: %w", err)
	}
	return sum, damage
}

// PouchDBRestoreWorkers is Restore's default Engine.Workers into PouchDB
// Server. Its ingest is one Node.js process whose CPU is the limit: more
// _bulk_docs bodies in flight only give it more parsed bodies to hold and
// collect. Measured on PouchDB Server 4.2 (in memory, 2 cores, 100,000
// revisions of 1 KiB): 2 workers took 8-10% less server CPU and 4-8% less
// wall time than 4, and 8 took more than 4; 10,000 revisions were equal.
const PouchDBRestoreWorkers = 2

// restoreWorkers returns the batches in flight per database: n when set
// (> 0), else PouchDBRestoreWorkers for PouchDB Server and
// replicate.DefaultWorkers for every other server.
func restoreWorkers(n int, v couch.Vendor) int {
	switch {
	case n > 0:
		return n
	case v == couch.VendorPouchDB:
		return PouchDBRestoreWorkers
	default:
		return replicate.DefaultWorkers
	}
}

// checkSelection reads the manifests of archive files before anything is
// written: a database URL as target takes exactly one selected database,
// and every --rename must name a database of the archives. (An archive
// read from stdin cannot be looked at twice; it is checked as it goes.)
//
// It returns, per archive, the selected databases of its manifest in
// order (nil for stdin), to list those a stopped restore did not reach.
func (c *restorer) checkSelection(ctx context.Context, archives []*Endpoint, filter fleet.Filter, renames map[string]string, oneDB bool) ([][]string, error) {
	if len(archives) == 1 && archives[0].archive == storage.Stdio {
		return nil, nil
	}
	selected := map[string]bool{}
	all := map[string]bool{}
	perArchive := make([][]string, len(archives))
	for i, a := range archives {
		path := a.archive
		f, err := a.store.Open(ctx, path)
		if err != nil {
			return nil, err
		}
		_, dbs, err := archive.List(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, d := range dbs {
			all[d.Name] = true
			if filter.Match(d.Name) {
				selected[d.Name] = true
				perArchive[i] = append(perArchive[i], d.Name)
			}
		}
	}
	for old := range renames {
		if !all[old] {
			return nil, optionErr("--rename %s=...: the archive holds no database %q", old, old)
		}
	}
	if oneDB && len(selected) != 1 {
		return nil, optionErr("the target is a database URL but %d databases of the archive are selected: restore into a server URL, or select one with --include", len(selected))
	}
	return perArchive, nil
}

// checkChain reads the headers of archive files and refuses archives that
// do not form a chain (a full archive, then incrementals in order). For a
// chain of several it also reads each manifest and returns, per database,
// the index of the last archive holding a full backup of it: a database
// recreated at the source between two backups is stored in full again,
// and its restore starts there (what earlier archives hold of it belongs
// to the deleted database). A single archive gives a nil map.
//
// gone holds, per database of a chain absent from its last archive, the
// index of the last archive that holds it (nil for a single archive).
func checkChain(ctx context.Context, archives []*Endpoint) (fullFrom, gone map[string]int, err error) {
	for _, a := range archives {
		if a.archive == storage.Stdio && len(archives) > 1 {
			return nil, nil, optionErr("stdin (-) can only be the one archive of a restore")
		}
	}
	if len(archives) == 1 && archives[0].archive == storage.Stdio {
		return nil, nil, nil
	}
	var headers []archive.Header
	fullFrom = map[string]int{}
	lastIn := map[string]int{}
	for i, a := range archives {
		path := a.archive
		f, err := a.store.Open(ctx, path)
		if err != nil {
			return nil, nil, err
		}
		var h archive.Header
		if len(archives) == 1 {
			h, err = archive.ReadHeader(f)
		} else {
			var dbs []archive.DBSummary
			h, dbs, err = archive.List(f)
			for _, d := range dbs {
				if i == 0 || len(d.Since) == 0 {
					fullFrom[d.Name] = i
				}
				lastIn[d.Name] = i
			}
		}
		f.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		headers = append(headers, h)
	}
	if err := archive.CheckChain(headers...); err != nil {
		return nil, nil, &OptionError{Err: err} // the arguments, not the archives, are wrong
	}
	if len(archives) == 1 {
		return nil, nil, nil
	}
	gone = map[string]int{}
	for name, i := range lastIn {
		if i < len(archives)-1 {
			gone[name] = i
		}
	}
	return fullFrom, gone, nil
}

// restoreArchive restores every selected database of one archive, in
// archive order. A damaged archive stops the restore (fatal): nothing after
// the damage is used, and the database being restored is reported failed.
//
// index is the archive's place in the chain; fullFrom (from checkChain)
// says from which archive each database is restored.
//
// done receives the name of every database of the archive it started.
func (c *restorer) restoreArchive(ctx context.Context, a *Endpoint, index int, fullFrom map[string]int, tgt *couch.Endpoint, filter fleet.Filter, renames map[string]string, sum *fleet.Summary, done map[string]bool) error {
	path := a.archive
	f, err := a.store.Open(ctx, path)
	if err != nil {
		return err
	}
	defer f.Close()
	rd, err := archive.NewReader(f, &archive.ReaderOptions{BlobMemory: c.blobMemory()})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer rd.Close()
	picked := 0
	for {
		dbr, err := rd.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if !filter.Match(dbr.Name()) {
			continue
		}
		if from, ok := fullFrom[dbr.Name()]; ok && index < from {
			continue // recreated at the source later in the chain
		}
		incremental := index > 0 && len(dbr.Since()) > 0
		done[dbr.Name()] = true
		picked++
		name := dbr.Name()
		if nu, ok := renames[name]; ok {
			name = nu
		}
		if tgt.DBName != "" {
			if picked > 1 {
				return optionErr("%s holds several databases: restore into a server URL, or select one with --include", path)
			}
			name = tgt.DBName
		}
		t0 := time.Now()
		r, err := c.restoreDB(ctx, dbr, tgt.Server, name, incremental, noDBProgress{})
		r.Name = name
		r.Duration = fleet.Duration(time.Since(t0))
		fleet.Decide(ctx, &r, err)
		sum.Add(r)
		if r.Status == fleet.StatusInterrupted {
			sum.Interrupted = true
		}
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return fmt.Errorf("restore: %w", err)
			}
			var ae *archive.Error
			if errors.As(err, &ae) {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
	}
}

// restoreDB restores one database group into the database name of tsrv:
// the target prepared (created, or an existing one accepted), the
// documents copied with design documents last and `_security` after them.
func (c *restorer) restoreDB(ctx context.Context, dbr *archive.DBReader, tsrv *couch.Server, name string, incremental bool, p DBProgress) (r fleet.DBResult, err error) {
	r = fleet.DBResult{Name: name}
	meta, err := dbr.Metadata(ctx)
	if err != nil {
		return r, err
	}
	sinfo, err := dbr.Info(ctx)
	if err != nil {
		return r, err
	}
	p.SetDocsTotal(sinfo.DocCount + sinfo.DelCount)
	rules := targetRules{
		Props:  couch.CreateOptions{Partitioned: meta.Partitioned, Q: c.o.Q, N: c.o.N},
		Absent: c.onTarget != nil && !c.onTarget[name],
		Reuse:  c.o.ReuseExisting || incremental || systemDB(name),
	}
	if c.o.Replace && !incremental && !systemDB(name) {
		rules.Replace = func(ctx context.Context) error { return c.recreate(ctx, tsrv.DB(name)) }
	}
	pt, err := prepareTarget(ctx, tsrv, name, sinfo, rules)
	if err != nil {
		return r, dbcopy.AsInterrupted(ctx, err)
	}
	if pt.Created {
		defer func() {
			if ae := (*archive.Error)(nil); err != nil && errors.As(err, &ae) {
				left := "incomplete"
				if r.DocsWritten == 0 {
					left = "empty"
				}
				err = fmt.Errorf("%w (the database %s, created by this restore, is left %s on the target)", err, name, left)
			}
		}()
	}
	tdb := tsrv.OpenDB(name, couch.DBOptions{Fresh: pt.Created})
	var src replicate.Source = dbr
	var winners *winnerLog
	if pt.Reused && !incremental {
		// The target held documents before: note the archive's winning
		// revisions to tell afterwards which documents were not rolled back.
		if winners, err = newWinnerLog(dbr); err != nil {
			return r, err
		}
		defer winners.Close()
		src = winners
	}
	target := &restoreTarget{DesignLast: replicate.NewDesignLast(tdb)}
	opts := c.o.Engine
	opts.CopyMetadata = true
	opts.SourceReadOnly = true // an archive takes no checkpoint
	opts.Counters = &replicate.Counters{}
	opts.Budget = c.budget
	var warnMu sync.Mutex
	warn := func(s string) {
		c.o.logf("%s: %s", name, s)
		warnMu.Lock()
		r.Warnings = append(r.Warnings, s)
		warnMu.Unlock()
	}
	opts.Warn = warn
	if c.o.DebugLogf != nil {
		opts.Debug = func(format string, args ...any) { c.o.DebugLogf(name+": "+format, args...) }
	}
	if pt.Created {
		opts.TargetCreated = tdb.Created()
	}
	c.o.logf("restoring %s", name)
	stop := dbcopy.FeedProgress(opts.Counters, p)
	res, err := replicate.Run(ctx, src, target, opts)
	stop()
	dbcopy.FillResult(&r, res)
	if err != nil {
		return r, err
	}
	fails, err := target.Finish(ctx)
	if res != nil && len(fails) > 0 {
		r.Failures = append(r.Failures, fails...)
		r.DocWriteFailures += int64(len(fails))
		r.DocsWritten -= int64(len(fails))
	}
	if err != nil {
		return r, err
	}
	if err := target.setSecurity(ctx); errors.Is(err, replicate.ErrMetadataRefused) {
		warn(err.Error())
	} else if err != nil {
		return r, fmt.Errorf("target: %w", err)
	}
	if s, ok := dbr.Summary(); ok && s.Error != "" {
		return r, fmt.Errorf("the backup of this database failed part way: %s", s.Error)
	}
	if winners != nil {
		failed := map[string]bool{}
		for _, f := range r.Failures {
			failed[f.ID] = true
		}
		kept, total, err := winners.notWinning(ctx, tdb, failed)
		if err != nil {
			return r, fmt.Errorf("target: compare winning revisions: %w", err)
		}
		if kept > 0 {
			warn(fmt.Sprintf("not rolled back: %d of %d documents of the archive have a winning revision on the target that is not the archive's (the archive's revision was already there or lost to a newer one); --replace restores the archive's state", kept, total))
		}
	}
	return r, nil
}

// systemDB reports whether name is _users or _replicator, which a restore
// writes into (never deletes, never refuses): the server created them and
// uses them.
func systemDB(name string) bool { return name == "_users" || name == "_replicator" }

// recreate deletes tdb and creates it again with its partitioned flag, q
// and n (--q/--n win) and puts its _security back at once, so the new
// database is never more open than the old one was.
func (c *restorer) recreate(ctx context.Context, tdb *couch.DB) error {
	old, err := tdb.Metadata(ctx)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	q, n, err := tdb.Shards(ctx)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	if c.o.Q > 0 {
		q = c.o.Q
	}
	if c.o.N > 0 {
		n = c.o.N
	}
	c.o.logf("%s: --replace: deleting the database and creating it again", tdb.Name())
	srv := tdb.Server()
	if err := srv.DeleteDB(ctx, tdb.Name()); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	if err := srv.CreateDB(ctx, tdb.Name(), couch.CreateOptions{Partitioned: old.Partitioned, Q: q, N: n}); err != nil {
		return fmt.Errorf("target: recreate after delete: %w", err)
	}
	if sec := bytes.TrimSpace(old.Security); len(sec) > 0 && !bytes.Equal(sec, []byte("{}")) {
		if err := tdb.SetMetadata(ctx, replicate.Metadata{Security: sec}, replicate.AfterDocs); err != nil {
			return fmt.Errorf("target: put _security back: %w", err)
		}
	}
	return nil
}

// winnerLog is the archive source of a restore into a database that held
// documents: it notes, in a temporary file, the archive's winning revision
// of every document as the changes pass, so that afterwards the target's
// winners can be compared without holding every id in memory.
type winnerLog struct {
	*archive.DBReader
	f   *os.File
	w   *bufio.Writer
	enc *json.Encoder
	err error
}

func newWinnerLog(dbr *archive.DBReader) (*winnerLog, error) {
	f, err := os.CreateTemp("", "sofa-restore-winners-*")
	if err != nil {
		return nil, fmt.Errorf("temporary file: %w", err)
	}
	w := bufio.NewWriter(f)
	return &winnerLog{DBReader: dbr, f: f, w: w, enc: json.NewEncoder(w)}, nil
}

// Changes passes the archive's changes after since on, noting the winner
// of every document of the archive, those before since included (a rerun
// resuming from a checkpoint still compares every document). The leaves
// of one document may come in two Changes (a chunk boundary): a document
// is noted once its last one has passed.
func (l *winnerLog) Changes(ctx context.Context, since replicate.Seq, fn func(replicate.Change) error) error {
	var after int64
	if s := since.String(); s != "" && s != "0" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("archive: since %q is not a seq of this archive", s)
		}
		after = n
	}
	var id string
	var best *replicate.Doc
	note := func() {
		if best != nil && l.err == nil {
			l.err = l.enc.Encode([2]string{id, best.Rev})
		}
		best = nil
	}
	err := l.DBReader.Changes(ctx, nil, func(ch replicate.Change) error {
		if ch.ID != id {
			note()
			id = ch.ID
		}
		for _, d := range ch.Docs {
			if best == nil || wins(d, best) {
				best = d
			}
		}
		if n, err := strconv.ParseInt(ch.Seq.String(), 10, 64); err == nil && n <= after {
			return nil // copied by an earlier run
		}
		return fn(ch)
	})
	note()
	return err
}

// notWinning reads the noted winners back in batches and asks the target
// for its winners: kept counts the documents whose winner on the target
// is not the archive's (ids in skip, already reported failed, aside),
// total the documents compared.
func (l *winnerLog) notWinning(ctx context.Context, tdb *couch.DB, skip map[string]bool) (kept, total int64, err error) {
	if l.err == nil {
		l.err = l.w.Flush()
	}
	if l.err != nil {
		return 0, 0, fmt.Errorf("temporary file: %w", l.err)
	}
	if _, err := l.f.Seek(0, io.SeekStart); err != nil {
		return 0, 0, fmt.Errorf("temporary file: %w", err)
	}
	dec := json.NewDecoder(bufio.NewReader(l.f))
	const batch = 500
	want := make(map[string]string, batch)
	check := func() error {
		if len(want) == 0 {
			return nil
		}
		ids := make([]string, 0, len(want))
		for id := range want {
			ids = append(ids, id)
		}
		got, err := tdb.Winners(ctx, ids)
		if err != nil {
			return err
		}
		for id, rev := range want {
			total++
			if got[id] != rev {
				kept++
			}
		}
		clear(want)
		return nil
	}
	for {
		var e [2]string
		if err := dec.Decode(&e); err == io.EOF {
			break
		} else if err != nil {
			return 0, 0, fmt.Errorf("temporary file: %w", err)
		}
		if skip[e[0]] {
			continue
		}
		want[e[0]] = e[1] // a document seen twice (resume) keeps its last winner
		if len(want) >= batch {
			if err := check(); err != nil {
				return 0, 0, err
			}
		}
	}
	return kept, total, check()
}

// Close removes the temporary file.
func (l *winnerLog) Close() {
	l.f.Close()
	os.Remove(l.f.Name())
}

// wins reports whether leaf a beats leaf b by CouchDB's rule for the
// winning revision: a live leaf beats a deleted one, then the longer
// history (higher generation), then the greater revision id.
func wins(a, b *replicate.Doc) bool {
	if a.Deleted != b.Deleted {
		return !a.Deleted
	}
	ga, ia := splitRev(a.Rev)
	gb, ib := splitRev(b.Rev)
	if ga != gb {
		return ga > gb
	}
	return ia > ib
}

// splitRev splits "N-hash" into N and hash (0 and rev when malformed).
func splitRev(rev string) (int, string) {
	n, id, ok := strings.Cut(rev, "-")
	if !ok {
		return 0, rev
	}
	gen, err := strconv.Atoi(n)
	if err != nil {
		return 0, rev
	}
	return gen, id
}

// restoreTarget holds design documents back (DesignLast) and `_security`
// too: the engine sets it once the other documents are written, but a
// restore sets it last, after the design documents (setSecurity).
type restoreTarget struct {
	*replicate.DesignLast
	after *replicate.Metadata
}

// SetMetadata applies the BeforeDocs phase (_revs_limit, properties) at
// once and keeps the AfterDocs one for setSecurity.
func (t *restoreTarget) SetMetadata(ctx context.Context, m replicate.Metadata, phase replicate.MetadataPhase) error {
	if phase == replicate.AfterDocs {
		t.after = &m
		return nil
	}
	return t.DesignLast.SetMetadata(ctx, m, phase)
}

// setSecurity applies the kept AfterDocs metadata; call it after Finish.
func (t *restoreTarget) setSecurity(ctx context.Context) error {
	if t.after == nil {
		return nil
	}
	return t.DesignLast.SetMetadata(ctx, *t.after, replicate.AfterDocs)
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
	merged := fleet.Summary{Started: s.Started, Interrupted: s.Interrupted}
	for _, name := range order {
		merged.Add(*byName[name])
	}
	*s = merged
}
