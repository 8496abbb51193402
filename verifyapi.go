package sofa

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/limitstats"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/verify"
)

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Compare are the comparison's options (mode, metadata, differences
	// listed). LenientRevpos and DoubleNumbers are set when either side
	// is PouchDB Server. Its zero value compares documents only: set
	// Compare.Metadata (and Partitioned) to compare `_security`,
	// `_revs_limit` (and the partitioned property) too, as the CLI does
	// for server URLs.
	Compare verify.Options
	// Selection picks the databases of two servers (Skip: ReplicateSkip
	// when nil; Shard: one part of the databases of a, and of those only
	// b holds), or with Include and Exclude those of an archive (read
	// through its index when it has one: only the picked databases). A
	// selection matching nothing is an error unless it is one part of a
	// larger run (Sharded, or a Shard): then it compares nothing.
	Selection Selection
	// WithReplicator, for an archive or a set compared with a server,
	// also compares the archive's `_replicator`. When false, it is left
	// out, as a restore leaves it out unless RestoreOptions.WithReplicator
	// (an Include pattern beginning with "_" that matches it compares it
	// too), and named in the summary's LeftOut.
	WithReplicator bool
	// RunControl paces a comparison of two servers as in CopyOptions
	// (MaxDBs, Fixed, IdealDuration), and receives its progress (one
	// database per comparison) and log lines.
	RunControl
}

// VerifyDB is the outcome of one database.
type VerifyDB struct {
	Name   string         `json:"name"`
	Status string         `json:"status"` // equal, different, failed, interrupted, not_started
	Error  string         `json:"error,omitempty"`
	Report *verify.Report `json:"report,omitempty"`
}

// VerifySummary is the result of Verify, ready for encoding/json.
type VerifySummary struct {
	Equal       bool               `json:"equal"`
	DBsTotal    int                `json:"dbs_total"`
	DBsEqual    int                `json:"dbs_equal"`
	DBsDiffer   int                `json:"dbs_different"`
	DBsFailed   int                `json:"dbs_failed"`
	Interrupted bool               `json:"interrupted,omitempty"`
	DBs         []VerifyDB         `json:"dbs"`
	Hosts       []limitstats.Stats `json:"hosts,omitempty"`
	// LeftOut are the databases not compared by default, with the
	// reason: an archive's _replicator (see VerifyOptions.WithReplicator),
	// or the system databases of server a that the Selection's Skip left
	// out (ReplicateSkip unless set).
	LeftOut []fleet.LeftOut `json:"left_out,omitempty"`
}

// ErrSeveralDatabases: an archive of several databases compared with a
// database URL (an *OptionError wraps it).
var ErrSeveralDatabases = errors.New("holds several databases: compare it with a server URL, or select one with --include")

// Verify compares a with b: two databases, two servers (every selected
// database of a with its namesake on b, many at once; selected databases
// only b holds are differences too), or an archive with a server (each of
// its databases with its namesake) or database (its one database). The
// error is non-nil when nothing could be compared, a selection that
// matches no database included (unless it is one part of a larger run:
// Selection.Sharded, or a Shard);
// per-database outcomes (equal, different, failed, interrupted) are in
// the summary.
func Verify(ctx context.Context, a, b *Endpoint, o VerifyOptions) (*VerifySummary, error) {
	if err := opened(a, b); err != nil {
		return nil, err
	}
	if b.Kind() == KindArchive && a.Kind() == KindArchive {
		return nil, optionErr("verify: %s and %s are both archives: check archives with CheckArchives or VerifyChain, or compare one with a server", a, b)
	}
	if b.Kind() == KindArchive {
		return nil, optionErr("verify: %s is an archive: give it first", b)
	}
	o.Compare.LenientRevpos = o.Compare.LenientRevpos || isPouch(a) || isPouch(b)
	o.Compare.DoubleNumbers = o.Compare.DoubleNumbers || isPouch(a) || isPouch(b)
	if o.Selection.Shard.Sharded() && (a.Kind() != KindServer || b.Kind() != KindServer) {
		return nil, optionErr("--shard %s: a sharded verify compares two server URLs", o.Selection.Shard)
	}
	switch {
	case a.Kind() == KindArchive:
		if err := o.Selection.Validate(); err != nil {
			return nil, err
		}
		res, err := verifyArchive(ctx, a, b, o.Compare, archiveFilter(o, b))
		if err != nil || res.Interrupted {
			return res, err
		}
		if err := o.Selection.noneMatched(res.DBsTotal, "%s: no database of the archive matches", a); err != nil {
			return nil, err
		}
		return res, nil
	case a.Kind() == KindServer && b.Kind() == KindServer:
		return verifyServers(ctx, a, b, o)
	case a.Kind() == KindDatabase && b.Kind() == KindDatabase:
		if len(o.Selection.Include) > 0 || len(o.Selection.Exclude) > 0 {
			return nil, optionErr("verify: --include and --exclude select databases of a server or an archive; %s and %s are databases", a, b)
		}
		var res VerifySummary
		res.add(dbOutcome(ctx, a.DBName(), a.couch.Server.DB(a.DBName()), b.couch.Server.DB(b.DBName()), o.Compare))
		return &res, nil
	}
	return nil, optionErr("A and B must both be databases or both be servers")
}

func isPouch(e *Endpoint) bool {
	return e.couch != nil && e.couch.Server.Vendor == couch.VendorPouchDB
}

func dbOutcome(ctx context.Context, name string, a, b replicate.Source, o verify.Options) VerifyDB {
	rep, err := verify.Compare(ctx, a, b, o)
	d := VerifyDB{Name: name, Report: rep}
	switch {
	case err != nil && ctx.Err() != nil:
		d.Status, d.Error = "interrupted", err.Error()
	case err != nil:
		d.Status, d.Error = "failed", err.Error()
	case rep.Equal():
		d.Status = "equal"
	default:
		d.Status = "different"
	}
	return d
}

func (r *VerifySummary) add(d VerifyDB) {
	r.DBs = append(r.DBs, d)
	r.DBsTotal++
	switch d.Status {
	case "equal":
		r.DBsEqual++
	case "different":
		r.DBsDiffer++
	case "failed":
		r.DBsFailed++
	default:
		r.Interrupted = true
	}
	r.Equal = r.DBsEqual == r.DBsTotal
}

// verifyServers compares every selected database of a with its namesake
// on b; selected databases only b holds are differences too.
func verifyServers(ctx context.Context, a, b *Endpoint, o VerifyOptions) (*VerifySummary, error) {
	var res VerifySummary
	if o.Selection.Skip == nil {
		o.Selection.Skip = ReplicateSkip
	}
	if err := o.Selection.Validate(); err != nil {
		return nil, err
	}
	filter := o.Selection.filter()
	as, bs := a.couch.Server, b.couch.Server
	an, err := fleet.ListDBs(ctx, as, 0)
	if err != nil {
		return nil, fmt.Errorf("a: list databases: %w", err)
	}
	bn, err := fleet.ListDBs(ctx, bs, 0)
	if err != nil {
		return nil, fmt.Errorf("b: list databases: %w", err)
	}
	dbs := o.Selection.apply(an)
	res.LeftOut = o.Selection.skipped(an)
	var mu sync.Mutex
	out := map[string]VerifyDB{}
	job := func(ctx context.Context, name string, _ DBProgress) (fleet.DBResult, error) {
		d := dbOutcome(ctx, name, as.DB(name), bs.DB(name), o.Compare)
		mu.Lock()
		out[name] = d
		mu.Unlock()
		r := fleet.DBResult{}
		if d.Report != nil {
			r.DocsRead = d.Report.Docs
		}
		if d.Error != "" {
			return r, errors.New(d.Error)
		}
		return r, nil
	}
	sum, runErr := o.runDBs(ctx, dbs, job, NewStallWatch(a, b).Waiting, false, a, b)
	for _, r := range sum.DBs {
		d, ok := out[r.Name]
		if !ok {
			d = VerifyDB{Name: r.Name, Status: string(r.Status)}
		}
		res.add(d)
	}
	inA := map[string]bool{}
	for _, n := range an {
		inA[n] = true
	}
	// A name a holds that b's listing lacks may be stored under another
	// name there (PouchDB Server keeps "a/b" as "ab"): resolved first.
	for _, n := range fleet.Unmatched(ctx, bs, an, filter.Apply(bn)) {
		if !inA[n] && o.Selection.Shard.Holds(n) {
			rep := &verify.Report{Mode: o.Compare.Mode.String(), Total: 1, ByKind: map[verify.Kind]int{verify.KindOnlyInB: 1},
				Differences: []verify.Difference{{Kind: verify.KindOnlyInB, Detail: fmt.Sprintf("database %q exists only in b", n)}}}
			res.add(VerifyDB{Name: n, Status: "different", Report: rep})
		}
	}
	res.Hosts = sum.Hosts
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return &res, runErr
	}
	if err := o.Selection.noneMatched(res.DBsTotal, "a: no database matches (of %d listed; b: %d)", len(an), len(bn)); err != nil {
		return nil, err
	}
	return &res, nil
}

// verifyArchive compares each database of an archive with the database
// of the same name on a server (or with the one database of a database
// URL), as the archive recorded it.
//
// filter (Include and Exclude of the options' Selection) picks the
// archive's databases; when it leaves some out and the archive has an
// index, only the picked ones are read.
func verifyArchive(ctx context.Context, a, b *Endpoint, o verify.Options, filter fleet.Filter) (*VerifySummary, error) {
	path := a.archive
	f, err := a.store.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var res VerifySummary
	var rd *archive.Reader
	if idx := selectiveIndex(f, filter); idx != nil {
		for _, d := range idx.Databases {
			res.leaveOut(d.Summary.Name, filter)
		}
		rd, err = archive.NewIndexedReader(f, idx, filter.Match, nil)
	} else {
		rd, err = archive.NewReader(f, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer rd.Close()
	if h := rd.Header(); h.Since != nil {
		// Its databases hold only what changed after the archive before
		// it: compared alone with a database they would differ everywhere.
		return nil, &OptionError{Err: fmt.Errorf("%s is an incremental archive (it continues archive %s): it holds only the changes since then, so it cannot be compared with a database alone; restore the chain and compare the copy (sofa verify SOURCE COPY), or check its checksums with sofa verify %s", path, h.Since.ArchiveID, path)}
	}
	for {
		dbr, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if !filter.Match(dbr.Name()) {
			res.leaveOut(dbr.Name(), filter)
			continue
		}
		name := dbr.Name()
		if b.DBName() != "" {
			if res.DBsTotal > 0 {
				return nil, &OptionError{Err: fmt.Errorf("%s %w", path, ErrSeveralDatabases)}
			}
			name = b.DBName()
		}
		sp, err := verify.NewSpooled(dbr, "")
		if err != nil {
			return nil, err
		}
		res.add(dbOutcome(ctx, dbr.Name(), sp, b.couch.Server.DB(name), o))
		sp.Close()
		if ctx.Err() != nil {
			res.Interrupted = true
			break
		}
	}
	return &res, nil
}

// VerifySet compares each database of every present member of a set
// (see OpenSet) with the database of the same name on the server b, as
// Verify does for one archive; the outcomes of all members are in one
// summary. A selection that matches no database of the set is an error,
// unless o.Selection.Sharded (the summary is then empty and equal).
func VerifySet(ctx context.Context, set *ArchiveSet, b *Endpoint, o VerifyOptions) (*VerifySummary, error) {
	if set == nil {
		return nil, optionErr("verify: no archive set (nil): open one with sofa.OpenSet")
	}
	if err := opened(b); err != nil {
		return nil, err
	}
	if b.Kind() != KindServer {
		return nil, optionErr("verify: a set holds several databases: compare it with a server URL, or select one with --include, not %s", b)
	}
	o.Compare.LenientRevpos = o.Compare.LenientRevpos || isPouch(b)
	o.Compare.DoubleNumbers = o.Compare.DoubleNumbers || isPouch(b)
	var res VerifySummary
	for _, m := range set.Members {
		r, err := verifyArchive(ctx, m, b, o.Compare, archiveFilter(o, b))
		if err != nil {
			return nil, err
		}
		for _, d := range r.DBs {
			res.add(d)
		}
		res.LeftOut = append(res.LeftOut, r.LeftOut...)
		if r.Interrupted {
			res.Interrupted = true
			break
		}
	}
	if res.Interrupted {
		return &res, nil
	}
	if err := o.Selection.noneMatched(res.DBsTotal, "set %s: no database of its %d members present matches", set.Manifest, len(set.Members)); err != nil {
		return nil, err
	}
	if res.DBsTotal == 0 {
		res.Equal = true // an empty part (Sharded): nothing differs
	}
	return &res, nil
}

// replicatorLeftOut is why an archive's _replicator is not compared with
// a server by default.
const replicatorLeftOut = "a restore leaves it out unless --with-replicator (its documents would start replications on the target); --with-replicator compares it"

// leaveOut notes name in LeftOut when filter's Skip alone leaves it out.
func (s *VerifySummary) leaveOut(name string, filter fleet.Filter) {
	loose := fleet.Filter{Include: filter.Include, Exclude: filter.Exclude}
	if !filter.Match(name) && loose.Match(name) {
		s.LeftOut = append(s.LeftOut, fleet.LeftOut{Name: name, Reason: replicatorLeftOut})
	}
}

// archiveFilter is the part of a selection that applies to an archive's
// databases compared with b: Include and Exclude (an archive holds what
// its backup selected; no Skip), and _replicator left out when b is a
// server, unless WithReplicator (as a restore does).
func archiveFilter(o VerifyOptions, b *Endpoint) fleet.Filter {
	f := fleet.Filter{Include: o.Selection.Include, Exclude: o.Selection.Exclude}
	if !o.WithReplicator && b.Kind() == KindServer {
		f.Skip = []string{"_replicator"}
	}
	return f
}
