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
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/storage"
)

// groupIndex locates the database groups of archive a, to read several
// at once at their offsets: nil (and no error) when a can only be read in
// order. The one place restore looks up offsets: an index stored with the
// archive would be read here. reread: each database may be read again
// (Verify, Replace), which needs its offsets even where reading in order
// is faster.
func groupIndex(ctx context.Context, a *Endpoint, o *archive.ReaderOptions, reread bool) (*archive.Index, io.Closer, error) {
	if a.archive == storage.Stdio {
		return nil, nil, nil
	}
	f, err := a.store.Open(ctx, a.archive)
	if err != nil {
		return nil, nil, err
	}
	// unknown size, or an object store holding a few small databases:
	// read in order with the store's part-sized read-ahead, which beats
	// a few small groups' buffered reads at their offsets
	if f.Size() < 0 || !reread && storage.PrefersSequential(f) && fewSmallGroups(f) {
		f.Close()
		return nil, nil, nil
	}
	if n := readAhead(a.store); n > 0 && storage.PrefersSequential(f) {
		ro := *o
		ro.ReadAhead = n
		o = &ro
	} else if !storage.PrefersSequential(f) {
		// a local file: attachments past the blob memory are read again
		// at their offsets, not spilled to a temporary file
		ro := *o
		ro.RefetchBlobs = true
		o = &ro
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

// readAhead is the ranged reads an Index of an archive in st keeps in
// flight (archive.ReaderOptions.ReadAhead): an object store's transfers
// (storage.Parallel), so that its groups read at their offsets together
// have as many GETs in flight as a read in order or an upload would; 0
// for a file, whose ReadAt is no round trip.
func readAhead(st storage.Store) int {
	n, _ := storage.Parallelism(st)
	return n
}

// seqGroupsMax is the most database groups an archive in an object
// store (storage.Sequential) may hold for restore to read it in order:
// with more, databases restored at once (each group read through
// ranged reads of archive.ReaderOptions.ReadSize, the store's transfers
// of them in flight in all: ReadAhead) are the faster way.
const seqGroupsMax = 8

// fewSmallGroups tells whether the archive's index lists at most
// seqGroupsMax databases, of less than archive.DefaultReadSize on
// average; an archive without an index (format version 1) counts as
// such: finding its groups costs a ranged GET per tar header. Large
// groups are restored at their offsets, several at once, even when few:
// read in order they are restored one after the other, each at one
// database's ingest rate into the target (4 groups of 32 MiB of 2 MiB
// attachments into CouchDB, loaded: 5 s each whatever the read-ahead,
// so 4 transfers took as long as 1).
func fewSmallGroups(f storage.Reader) bool {
	toc, err := archive.ReadTOC(f, f.Size())
	if err != nil {
		return true
	}
	if len(toc.Databases) > seqGroupsMax {
		return false
	}
	var total int64
	for _, d := range toc.Databases {
		total += d.End - d.Offset
	}
	return len(toc.Databases) == 0 || total/int64(len(toc.Databases)) < archive.DefaultReadSize
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
		// A verify reads the source again, and --replace reads each
		// part before restoring it: both need the archive's index.
		x, f, err := groupIndex(ctx, a, ropts, c.o.Verify != VerifyNone || c.o.Replace)
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
			tname := c.targetName(g.Name, dst.couch.DBName)
			if _, ok := steps[tname]; !ok {
				names = append(names, tname)
			}
			steps[tname] = append(steps[tname], step{i, g})
		}
	}
	c.parts = func(tname string) []archivePart {
		var parts []archivePart
		for _, st := range steps[tname] {
			x, name := idx[st.arch], st.g.Name
			parts = append(parts, archivePart{path: archives[st.arch].archive, open: func(ctx context.Context) (replicate.Source, error) {
				return x.OpenSource(ctx, name, true)
			}})
		}
		return parts
	}
	var mu sync.Mutex
	var damage error
	j := c.job(dst.couch.Server)
	job := func(ctx context.Context, tname string, p DBProgress) (fleet.DBResult, error) {
		r := fleet.DBResult{Name: tname}
		chain := &chainSteps{}
		defer chain.close()
		for i, st := range steps[tname] {
			path := archives[st.arch].archive
			rr, err := j.run(ctx, dbTask{From: idx[st.arch], Source: st.g.Name, Target: tname,
				Incremental: st.arch > 0 && len(st.g.Since) > 0, Later: i < len(steps[tname])-1, Chain: chain}, p)
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
	sum, err := c.o.runDBs(ctx, names, job, NewStallWatch(append([]*Endpoint{dst}, archives...)...).Waiting, true, dst)
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

// CouchDBRestoreWorkers is Restore's default Engine.Workers into Apache
// CouchDB (or Cloudant): CouchDB stores _bulk_docs with new_edits=false
// faster with 8 batches in flight than with 4 (the ingest bound of
// pre-built 500-document batches, 100,000 revisions of 1 KiB, CouchDB
// 3.5.2 on 2 cores: 5.15-5.24 s against 5.58-6.11 s), and a restore with
// 8 took 5% (10,000 revisions) to 11% (100,000) less wall time than with
// 4 (medians of 3 and 4 interleaved runs). The host's adaptive limit
// still caps the requests in flight.
const CouchDBRestoreWorkers = 8

// restoreWorkers returns the batches in flight per database: n when set
// (> 0), else PouchDBRestoreWorkers for PouchDB Server,
// CouchDBRestoreWorkers for CouchDB and replicate.DefaultWorkers for a
// server that did not say what it is.
func restoreWorkers(n int, v couch.Vendor) int {
	switch {
	case n > 0:
		return n
	case v == couch.VendorPouchDB:
		return PouchDBRestoreWorkers
	case v == couch.VendorCouchDB:
		return CouchDBRestoreWorkers
	default:
		return replicate.DefaultWorkers
	}
}
