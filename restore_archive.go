package sofa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/storage"
)

// A restore into an archive (RestorePlan.Run with an archive target) and
// a backup from an archive (Backup with an archive source) copy the
// databases of archives into a new full archive through the one
// per-database job: the source of each database is its groups in the
// chain (chainSource, archive_chain.go), the target a group of the new
// archive (archive.Writer).

// ArchiveOutput configures the archive a restore writes when its target
// is an archive (RestoreOptions.Output).
type ArchiveOutput struct {
	// Compression of archive members ("": zstd).
	Compression archive.Compression
	// ArchiveVersion is the archive format version written: 0 means
	// archive.FormatVersion (3, which packs each database's small members);
	// 2 writes the layout that sofa releases before version 3 read.
	ArchiveVersion int
	// Overwrite replaces an existing archive (or an empty file); any other
	// file or object under the name is refused with an *OptionError.
	Overwrite bool
	// Tool is recorded in the archive's header ("sofa 1.2.3").
	Tool string
	// TempDir holds spool files while the archive is written; "": next
	// to a local archive file, else the system's.
	TempDir string
}

// runIntoArchive restores the planned chain into the archive dst: one
// full archive whose databases, restored into a server, give what the
// chain restored there gives (each database's groups in chain order, a
// database recreated at the source taken from the archive holding it in
// full, one absent from the chain's last archive left out). Its header's
// Source is the last archive's; each group ends at the seq and
// checkpoints of the database's last group in the chain, so an
// incremental backup of the server may continue the new archive
// (--since). A database not whole in any archive of the chain stays
// marked not whole (and failed in the Summary). Options of a server
// target only (Replace, ReuseExisting, Q, N) are refused with an
// *OptionError; every database is checked by the leaf revisions stored,
// whatever Verify says. _replicator is restored unless Selection leaves
// it out (an archive starts no replication).
func (p *RestorePlan) runIntoArchive(ctx context.Context, dst *Endpoint) (*Summary, error) {
	o := p.c.o
	if p.verb == "" {
		p.verb = "restore"
	}
	switch {
	case o.Replace:
		return nil, optionErr("restore into the archive %s: --replace applies to a server target (an archive is always written new)", dst)
	case o.ReuseExisting:
		return nil, optionErr("restore into the archive %s: --reuse-existing applies to a server target (an archive is always written new)", dst)
	case o.Q > 0 || o.N > 0:
		return nil, optionErr("restore into the archive %s: --q and --n apply to databases created on a server", dst)
	}
	for _, a := range p.archives {
		if err := CheckDistinct(a, dst); err != nil {
			return nil, err
		}
	}
	filter := p.filter
	if p.defaultSkip {
		filter = fleet.Filter{Include: o.Selection.Include, Exclude: o.Selection.Exclude}
	}
	c := &restorer{o: o, budget: replicate.NewBudget(o.Engine.MaxInflightBytes)}
	c.o.Verify = VerifyCheap // groups read at their offsets wherever they can be
	if _, damaged, err := c.checkSelection(ctx, p.archives, filter, o.Renames, false, nil); err != nil {
		return nil, err
	} else if damaged != nil {
		return nil, damaged
	}
	idx, closeAll, err := c.indexes(ctx, p.archives)
	if err != nil {
		return nil, err
	}
	var sum fleet.Summary
	var fatalErr error
	if idx != nil {
		defer closeAll()
		sum, fatalErr = p.copyIndexed(ctx, c, idx, dst, filter)
	} else {
		if len(p.archives) > 1 {
			return nil, fmt.Errorf("%s into an archive: the archives of a chain are read at their offsets, and one of them cannot be (its size is unknown, or it is damaged: run sofa verify on each)", p.verb)
		}
		sum, fatalErr = p.copyInOrder(ctx, c, p.archives[0], dst, filter)
	}
	if sum.DBs == nil && fatalErr != nil {
		return nil, fatalErr
	}
	return p.finish(&sum, fatalErr, filter)
}

// copyIndexed copies the databases of indexed archives into the new
// archive dst, many at once under the scheduler, each from its chain of
// groups.
func (p *RestorePlan) copyIndexed(ctx context.Context, c *restorer, idx []*archive.Index, dst *Endpoint, filter fleet.Filter) (fleet.Summary, error) {
	skip := p.skip()
	cs := &chainServer{steps: map[string][]chainStep{}}
	for i, x := range idx {
		cps, err := manifestCheckpoints(ctx, p.archives[i])
		if err != nil {
			return fleet.Summary{}, err
		}
		for _, g := range x.Groups() {
			if !filter.Match(g.Name) {
				continue
			}
			if from, ok := skip[g.Name]; ok && i < from {
				continue // recreated at the source later in the chain, or gone
			}
			tname := c.targetName(g.Name, "")
			if _, ok := cs.steps[tname]; !ok {
				cs.names = append(cs.names, tname)
			}
			cs.steps[tname] = append(cs.steps[tname], chainStep{x: x, g: g, path: p.archives[i].archive, checkpoints: cps[g.Name]})
		}
	}
	if len(cs.names) == 0 && !p.anyGone(filter) {
		if err := c.o.Selection.noneMatched(0, "no database of the archive was selected"); err != nil {
			return fleet.Summary{}, err
		}
	}
	out, err := createArchive(ctx, dst, c.o.Output, idx[len(idx)-1].Header().Source, p.verb, c.o.logf)
	if err != nil {
		return fleet.Summary{}, err
	}
	j := archiveJob(cs, out.w, c)
	var mu sync.Mutex
	var damage error
	job := func(ctx context.Context, name string, pr DBProgress) (fleet.DBResult, error) {
		r, err := j.run(ctx, dbTask{Source: name, Target: name}, pr)
		if ae := (*archive.Error)(nil); errors.As(err, &ae) {
			mu.Lock()
			if damage == nil {
				damage = err
			}
			mu.Unlock()
		}
		return r, err
	}
	sum, runErr := c.o.runDBs(ctx, cs.names, job, NewStallWatch().Waiting, false)
	if err := out.finish(&sum, runErr); err != nil {
		return out.failed(sum, err)
	}
	return sum, damage
}

// manifestCheckpoints reads the checkpoints of every database of archive
// a from its manifest, by name.
func manifestCheckpoints(ctx context.Context, a *Endpoint) (map[string]map[string]json.RawMessage, error) {
	f, err := a.store.Open(ctx, a.archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	_, dbs, err := archive.List(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.archive, err)
	}
	out := make(map[string]map[string]json.RawMessage, len(dbs))
	for _, d := range dbs {
		out[d.Name] = d.Checkpoints
	}
	return out, nil
}

// copyInOrder copies the databases of one archive that can only be read
// in order (stdin, or an archive whose index is damaged) into the new
// archive dst, one after the other; a damaged member stops it, and dst
// is then not written (it would lack the databases after the damage). The manifest, which alone holds each
// database's checkpoints, comes after the groups: they are not carried
// (each group keeps its seq only), and an incremental backup continuing
// the new archive backs each database up whole.
func (p *RestorePlan) copyInOrder(ctx context.Context, c *restorer, a *Endpoint, dst *Endpoint, filter fleet.Filter) (fleet.Summary, error) {
	f, err := a.store.Open(ctx, a.archive)
	if err != nil {
		return fleet.Summary{}, err
	}
	defer f.Close()
	rd, err := archive.NewReader(f, &archive.ReaderOptions{BlobMemory: c.blobMemory()})
	if err != nil {
		return fleet.Summary{}, fmt.Errorf("%s: %w", a.archive, err)
	}
	defer rd.Close()
	if err := archive.CheckChain(rd.Header()); err != nil {
		return fleet.Summary{}, &OptionError{Err: err}
	}
	out, err := createArchive(ctx, dst, c.o.Output, rd.Header().Source, p.verb, c.o.logf)
	if err != nil {
		return fleet.Summary{}, err
	}
	j := archiveJob(nil, out.w, c)
	names := newTargetNames(nil, c.o.Renames, "restored")
	sum := fleet.Summary{Started: time.Now()}
	c.o.progress().Start(-1, nil) // read in order: the databases are known as they come
	var fatalErr error
	for {
		dbr, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fatalErr = fmt.Errorf("%s: %w", a.archive, err)
			break
		}
		if !filter.Match(dbr.Name()) {
			continue
		}
		if err := names.add(dbr.Name()); err != nil {
			fatalErr = fmt.Errorf("%s: %w", a.archive, err) // stdin: found as it is read
			break
		}
		name := names.target(dbr.Name())
		r, err := runTold(ctx, c.o.progress(), name, func(p DBProgress) (fleet.DBResult, error) {
			return j.run(ctx, dbTask{Opened: dbr, Source: dbr.Name(), Target: name}, p)
		})
		sum.Add(r)
		if r.Status == fleet.StatusInterrupted || ctx.Err() != nil {
			sum.Interrupted = true
			break
		}
		if ae := (*archive.Error)(nil); errors.As(err, &ae) {
			fatalErr = fmt.Errorf("%s: %w", a.archive, err)
			break
		}
	}
	if sum.DBsTotal == 0 && fatalErr == nil {
		if err := c.o.Selection.noneMatched(0, "no database of the archive was selected"); err != nil {
			out.abort()
			return sum, err
		}
	}
	if fatalErr != nil && !sum.Interrupted {
		// What comes after the damage is not read: the new archive
		// would lack those databases without saying so.
		out.abort()
		return sum, fmt.Errorf("%w (%s was not written)", fatalErr, dst)
	}
	var runErr error
	if sum.Interrupted {
		runErr, fatalErr = ctx.Err(), nil
	}
	if err := out.finish(&sum, runErr); err != nil {
		return out.failed(sum, err)
	}
	return sum, fatalErr
}

// archiveJob is the per-database job from the chain server src (nil:
// every source opened by the caller) into the new archive w: each
// database a group, `_revs_limit` and `_security` copied, checked by the
// leaf revisions stored, and ended at its source group's state
// (archiveHooks).
func archiveJob(src replicate.SourceServer, w *archive.Writer, c *restorer) *pairJob {
	engine := c.o.Engine
	engine.CopyMetadata = true
	return &pairJob{src: src, tgt: w, engine: engine, budget: c.budget, verify: VerifyCheap,
		sourceReadOnly: true, onTarget: listedTarget(map[string]bool{}), rc: &c.o.RunControl, hooks: archiveHooks{}}
}

// archiveHooks end each group of an archive copied from archives where
// its source ended: the seq reached and checkpoints of the source's (last)
// group, so an incremental backup continues the new archive as the old
// one (a group whose copy failed keeps none: the next incremental backs
// the database up whole). A source group not whole makes the copy fail:
// the new group is marked not whole too.
type archiveHooks struct{}

// archivedSource is a source whose end state is known once read
// (archive.DBReader, chainSource).
type archivedSource interface {
	Summary() (archive.DBSummary, bool)
}

func (archiveHooks) pair(ctx context.Context, c *dbCopy, src replicate.Source, again bool) (replicate.Source, replicate.Target, func(context.Context) error, func(), error) {
	dw, _ := c.target.Target.(*archive.DBWriter)
	if dw != nil {
		dw.SetEndState(archive.DBState{}) // until the source is read whole
	}
	end := func(ctx context.Context) error {
		as, ok := src.(archivedSource)
		if !ok {
			return nil
		}
		s, read := as.Summary()
		if !read {
			return fmt.Errorf("the source archive's group of %s was not read to its end", c.task.Source)
		}
		if s.Error != "" {
			return fmt.Errorf("not whole in the source archive: %s", s.Error)
		}
		if dw != nil {
			dw.SetEndState(archive.DBState{Seq: s.Seq, Checkpoints: s.Checkpoints})
		}
		return nil
	}
	return src, c.target.Target, end, func() {}, nil
}

func (archiveHooks) failed(c *dbCopy, err error) error { return err }

// newArchive is an archive being written by a copy of archives.
type newArchive struct {
	name string // the archive's name
	sink storage.Writer
	w    *archive.Writer
	verb string
	// unwritten: the archive could not be written whole (finish's error
	// is the archive's, not the run's).
	unwritten bool
}

// createArchive creates the archive dst (checked before anything is
// read) and starts its writer, source recorded as the header's Source;
// verb names the operation in finish's errors.
func createArchive(ctx context.Context, dst *Endpoint, o ArchiveOutput, source, verb string, logf func(string, ...any)) (*newArchive, error) {
	if err := checkArchiveVersion(o.ArchiveVersion); err != nil {
		return nil, err
	}
	sink, err := dst.store.Create(ctx, dst.archive, storage.CreateOptions{Overwrite: o.Overwrite, OnStale: func(p string) {
		logf("removed %s (left by a killed backup)", p)
	}})
	if err != nil {
		return nil, nameErr(err)
	}
	if err := checkReplaceable(ctx, dst.store, dst.archive, o.Overwrite); err != nil {
		sink.Abort()
		return nil, err
	}
	tempDir := o.TempDir
	if _, local := dst.store.(storage.Local); tempDir == "" && local && dst.archive != storage.Stdio {
		tempDir = filepath.Dir(dst.archive)
	}
	w, err := archive.NewWriter(sink, archive.Options{Compression: o.Compression, Version: o.ArchiveVersion, Tool: o.Tool, Source: source, TempDir: tempDir,
		SpoolAhead: spoolAhead(dst.store)})
	if err != nil {
		sink.Abort()
		return nil, fmt.Errorf("write archive: %w", err)
	}
	return &newArchive{name: dst.archive, sink: sink, w: w, verb: verb}, nil
}

func (a *newArchive) abort() { a.sink.Abort() }

// finish commits the archive after a run that finished (a database not
// whole is marked so in it), or leaves none after an interrupted one
// (runErr, or sum.Interrupted: the error then matches ctx.Err()).
func (a *newArchive) finish(sum *fleet.Summary, runErr error) error {
	if sum.Interrupted || runErr != nil {
		a.sink.Abort()
		sum.NotWritten()
		if runErr == nil {
			runErr = context.Canceled
		}
		return fmt.Errorf("%s: %w", a.verb, runErr)
	}
	if err := a.w.Close(); err != nil {
		a.sink.Abort()
		a.unwritten = true
		return fmt.Errorf("write archive: %w", err)
	}
	if err := a.sink.Commit(); err != nil {
		a.unwritten = true
		return commitErr(a.name, err)
	}
	return nil
}

// failed returns the result of a run whose finish failed with err: no
// Summary when the archive could not be written (no database was copied
// into it), else sum.
func (a *newArchive) failed(sum fleet.Summary, err error) (fleet.Summary, error) {
	if a.unwritten {
		return fleet.Summary{}, err
	}
	return sum, err
}
