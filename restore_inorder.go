package sofa

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/replicate"
)

// runInOrder restores the archives one after the other, each database
// after the one before it in archive order: for archives that can only be
// read in order (stdin) or whose index cannot be used (damaged, cut
// short). A damaged archive stops it: every selected database it did not
// reach is listed not_started, and where those cannot be known (the
// manifest was never reached) the summary says so (TotalUnknown).
func (c *restorer) runInOrder(ctx context.Context, archives []*Endpoint, selected []archiveDBs, skip map[string]int, tgt *couch.Endpoint, filter fleet.Filter) (fleet.Summary, error) {
	o := c.o
	sum := fleet.Summary{Started: time.Now()}
	var fatalErr error
	j := c.job(tgt.Server)
	names := newTargetNames(tgt.Server, o.Renames, "restored")
	total := 0
	for _, dbs := range selected {
		if !dbs.known {
			total = -1
			break
		}
		total += len(dbs.names)
	}
	o.progress().Start(total, nil)
	// The databases of a damaged archive not restored whole, by name, with
	// that archive: the later archives go on without them (see damaged);
	// each has its result (failed, or not started) from that archive.
	blocked := map[string]string{}
	for i, a := range archives {
		st := &archiveRead{archiveDBs: selected[i], done: map[string]bool{}, blocked: blocked}
		later := func(name string) bool {
			for _, dbs := range selected[i+1:] {
				if dbs.known && slices.Contains(dbs.names, name) {
					return true
				}
			}
			return false
		}
		if err := c.restoreArchive(ctx, j, a, i, skip, later, tgt, filter, names, &sum, st); err != nil {
			if fatalErr == nil {
				fatalErr = err
			}
			if st.damaged(err) && i+1 < len(archives) {
				c.goesOnWithout(st, a, skip, i, tgt, &sum)
				continue
			}
			// Every selected database the restore did not reach is
			// listed: "not started" (from this archive on).
			for k := i; k < len(archives); k++ {
				dbs, done := selected[k], map[string]bool(nil)
				if k == i {
					dbs, done = st.archiveDBs, st.done
				}
				if !dbs.known {
					sum.TotalUnknown = true
					continue
				}
				for _, name := range dbs.names {
					if done[name] {
						continue
					}
					if from, ok := skip[name]; ok && k < from {
						continue
					}
					why := "the restore stopped before it"
					if k == i && errors.Is(err, archive.ErrManifest) {
						// the read reached the manifest: no group of it
						why = "its manifest lists it, but the archive holds no group of it"
					}
					sum.Add(fleet.DBResult{Name: c.targetName(name, tgt.DBName), Status: fleet.StatusNotStarted,
						Error: fmt.Sprintf("not restored from %s: %s", archives[k].archive, why)})
				}
			}
			break
		}
	}
	return sum, fatalErr
}

// archiveRead is what the restore of one archive in order knows of it:
// its selected databases (from its catalog, or learnt past the damage
// that stopped the read: learn) and those it started.
type archiveRead struct {
	archiveDBs
	done map[string]bool
	// failed is the database whose copy the damage stopped, if any.
	failed string
	// blocked is shared by the archives of one run (see runInOrder).
	blocked map[string]string
}

// damaged: err is damage found in the archive (a checksum, a record, a
// member: archive.Error), not a lost target or an interrupt, and the
// archive's databases are known, so that the archives after it can go
// on with the others: the members of a set hold other databases, and an
// incremental archive continues only the databases restored whole.
func (st *archiveRead) damaged(err error) bool {
	var ae *archive.Error
	return st.known && errors.As(err, &ae) && !errors.Is(err, context.Canceled)
}

// goesOnWithout lists the selected databases of the damaged archive a
// (index i) that the restore did not reach as not started, and blocks
// them and the one the damage stopped for the archives after it.
func (c *restorer) goesOnWithout(st *archiveRead, a *Endpoint, skip map[string]int, i int, tgt *couch.Endpoint, sum *fleet.Summary) {
	if st.failed != "" {
		st.blocked[st.failed] = a.archive
	}
	for _, name := range st.names {
		if st.done[name] {
			continue
		}
		if from, ok := skip[name]; ok && i < from {
			continue
		}
		st.blocked[name] = a.archive
		sum.Add(fleet.DBResult{Name: c.targetName(name, tgt.DBName), Status: fleet.StatusNotStarted,
			Error: fmt.Sprintf("not restored from %s: the archive is damaged before it", a.archive)})
	}
}

// failDamagedGroup gives the database whose group err found damaged
// before the group began (its first member, a pack of format version 3
// holding its meta.json) its result: failed, with err. Its name is known
// from the archive's databases, or from the member's directory when that
// is the name itself; otherwise it stays unnamed (not started, or
// unknown).
func (c *restorer) failDamagedGroup(st *archiveRead, err error, path string, tgt *couch.Endpoint, filter fleet.Filter, sum *fleet.Summary) {
	dir := archive.GroupDir(err)
	if dir == "" {
		return
	}
	name := ""
	if st.known {
		for _, n := range st.names {
			if archive.DirName(n) == dir {
				name = n
			}
		}
	} else if archive.DirName(dir) == dir {
		name = dir
	}
	if name == "" || st.done[name] || !filter.Match(name) {
		return
	}
	if _, ok := st.blocked[name]; ok {
		return
	}
	st.done[name] = true
	st.failed = name
	sum.Add(fleet.DBResult{Name: c.targetName(name, tgt.DBName), Status: fleet.StatusFailed,
		Error: fmt.Sprintf("%s: %v", path, err)})
}

// learn reads on past the damage that stopped rd to the archive's
// manifest (archive.Reader.Skim) when its databases are not known yet,
// to name those the restore never reached. A stream broken at the damage
// (cut short) leaves them unknown.
func (st *archiveRead) learn(c *restorer, rd *archive.Reader, filter fleet.Filter) {
	if st.known {
		return
	}
	dbs, err := rd.Skim()
	if err != nil {
		return
	}
	st.known = true
	if c.archived == nil {
		c.archived = map[string]bool{}
	}
	for _, d := range dbs {
		c.archived[d.Name] = true
		if filter.Match(d.Name) {
			st.names = append(st.names, d.Name)
		}
	}
}

// restoreArchive restores every selected database of one archive, in
// archive order, each with the job j. A damaged archive stops the restore (fatal): nothing after
// the damage is used, and the database being restored is reported failed.
//
// index is the archive's place in the chain; fullFrom (from checkChain)
// says from which archive each database is restored; later, whether a
// later archive's manifest lists a database (dbTask.Later). names gives each
// database's target name and refuses (an *OptionError, which stops the
// restore) a database restored into the target database of another: an
// archive read once (stdin) is checked as it goes, the database before
// it restored already.
//
// st.done receives the name of every database of the archive it started;
// st learns the archive's databases where damage stops the read.
func (c *restorer) restoreArchive(ctx context.Context, j *pairJob, a *Endpoint, index int, fullFrom map[string]int, later func(string) bool, tgt *couch.Endpoint, filter fleet.Filter, names *targetNames, sum *fleet.Summary, st *archiveRead) error {
	path := a.archive
	f, err := a.store.Open(ctx, path)
	if err != nil {
		return err
	}
	defer f.Close()
	ropts := &archive.ReaderOptions{BlobMemory: c.blobMemory()}
	var rd *archive.Reader
	if idx := selectiveIndex(f, filter); idx != nil {
		// Only the selected groups and the blobs they refer to are read.
		rd, err = archive.NewIndexedReader(f, idx, filter.Match, ropts)
	} else {
		rd, err = archive.NewReader(f, ropts)
	}
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
			st.learn(c, rd, filter)
			c.failDamagedGroup(st, err, path, tgt, filter, sum)
			return fmt.Errorf("%s: %w", path, err)
		}
		if !filter.Match(dbr.Name()) {
			continue
		}
		if from, ok := fullFrom[dbr.Name()]; ok && index < from {
			continue // recreated at the source later in the chain
		}
		if _, ok := st.blocked[dbr.Name()]; ok {
			// Its earlier part is in a damaged archive, whose result
			// (failed, or not started) says so.
			st.done[dbr.Name()] = true
			continue
		}
		incremental := index > 0 && len(dbr.Since()) > 0
		st.done[dbr.Name()] = true
		picked++
		name := names.target(dbr.Name())
		if tgt.DBName != "" {
			if picked > 1 {
				return optionErr("%s holds several databases: restore into a server URL, or select one with --include", path)
			}
			name = tgt.DBName
		} else if err := names.add(dbr.Name()); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		r, err := runTold(ctx, c.o.progress(), name, func(p DBProgress) (fleet.DBResult, error) {
			return j.run(ctx, dbTask{Opened: dbr, Source: dbr.Name(), Target: name, Incremental: incremental, Later: later(dbr.Name())}, p)
		})
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
				st.failed = dbr.Name()
				st.learn(c, rd, filter)
				return fmt.Errorf("%s: %w", path, err)
			}
			if ctx.Err() == nil && errors.Is(err, replicate.ErrUnreachable) {
				// The target is lost: the databases after this one are
				// not started (as in a restore at offsets, fleet.Run's
				// StopWhenLost) rather than each tried for the whole
				// retry budget while the archive is read to its end.
				return fleet.Lost(name, err)
			}
		}
	}
}

// runTold runs the copy of one database of an archive read in order
// (run), telling p (Begin, then End, EndInterrupted or EndLeftOut), as fleet.Run
// does for the databases it schedules, and completes its result.
func runTold(ctx context.Context, p Progress, name string, run func(DBProgress) (fleet.DBResult, error)) (fleet.DBResult, error) {
	dp := p.Begin(name)
	t0 := time.Now()
	r, err := run(dp)
	r.Name = name
	r.Duration = fleet.Duration(time.Since(t0))
	fleet.Decide(ctx, &r, err)
	fleet.EndProgress(p, name, dp, r.Status)
	return r, err
}
