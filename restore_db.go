package sofa

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/jsonx"
	"github.com/sofadb/sofa/replicate"
)

// job maps the options onto the per-database job into the server tsrv,
// from the archives each task names: databases created with their
// archived properties, claimed before any document, `_revs_limit` set
// first, design documents written after the others and `_security`
// last (restoreHooks); an incremental archive, _users and _replicator
// are written into whatever the target holds, and --replace recreates an
// existing database first.
func (c *restorer) job(tsrv *couch.Server) *pairJob {
	engine := c.o.Engine
	engine.CopyMetadata = true
	return &pairJob{tgt: tsrv, engine: engine, budget: c.budget, verify: c.o.Verify,
		q: c.o.Q, n: c.o.N, reuse: c.o.ReuseExisting,
		sourceReadOnly: true, // an archive takes no checkpoint
		lenientRevpos:  tsrv.Vendor == couch.VendorPouchDB, onTarget: c.onTarget, rc: &c.o.RunControl,
		retryRefused: true,
		rules: func(t dbTask, r *targetRules) {
			sys := systemDB(t.Target)
			r.Reuse = r.Reuse || t.Incremental || sys
			r.NotEmptyHint = "--reuse-existing adds the archive's revisions to it, --replace deletes it and restores the archive's state"
			if c.o.Replace && !t.Incremental && !sys {
				partitioned := r.Props.Partitioned // the archive's
				r.Replace = func(ctx context.Context) error {
					if err := c.checkParts(ctx, t.Target); err != nil {
						return err
					}
					return c.recreate(ctx, tsrv.DB(t.Target), partitioned)
				}
			}
		},
		hooks: restoreHooks{c}}
}

// restoreHooks are what a restore adds to the copy of each database:
// design documents held back until the others are written and
// `_security` set after them (restoreTarget), the archive's own verdict
// on the database (a backup that failed part way), and, into a database
// that held documents, the winner log that tells which documents were not
// rolled back.
type restoreHooks struct{ c *restorer }

func (h restoreHooks) pair(ctx context.Context, c *dbCopy, src replicate.Source, again bool) (replicate.Source, replicate.Target, func(context.Context) error, func(), error) {
	done := func() {}
	dbr, _ := src.(*archive.DBReader)
	var winners *winnerLog
	chain := c.task.Chain
	switch {
	case dbr == nil || again:
	case c.target.Reused && !c.task.Incremental:
		// The target held documents before: note the archive's winning
		// revisions to tell afterwards which documents were not rolled back.
		var err error
		w, ok := c.target.Target.(interface{ WinsAsCouchDB() bool })
		if winners, err = newWinnerLog(dbr, !ok || w.WinsAsCouchDB()); err != nil {
			return nil, nil, nil, nil, err
		}
	case c.task.Incremental && chain != nil && chain.winners != nil:
		// A later archive of the chain: its winners are the chain's.
		winners = chain.winners.with(dbr)
	}
	if winners != nil {
		src = winners
		if chain != nil && c.task.Later {
			chain.winners = winners // compared after the chain's last step
		} else {
			done = winners.Close
			if chain != nil {
				chain.winners = nil
			}
		}
	}
	if chain != nil && c.target.Created {
		chain.created = true
	}
	reused := !c.target.Created && !again && (chain == nil || !chain.created)
	target := &restoreTarget{DesignLast: replicate.NewDesignLast(c.target.Target), reused: reused, warn: c.warn,
		chain: chain, later: chain != nil && c.task.Later}
	if !again {
		h.c.o.logf("restoring %s", c.task.Target)
	}
	end := func(ctx context.Context) error {
		r := c.r
		fails, err := target.Finish(ctx)
		if n := int64(len(fails)); n > 0 {
			// The engine counted the held design revisions as written.
			r.Failures = append(r.Failures, fails...)
			r.DocWriteFailures += n
			r.DocsWritten -= n
			c.p.AddDocsWritten(-n)
			c.p.AddDocWriteFailures(n)
		}
		if err != nil {
			return err
		}
		if err := target.setSecurity(ctx); errors.Is(err, replicate.ErrMetadataRefused) {
			c.warn(err.Error())
		} else if err != nil {
			return fmt.Errorf("target: %w", err)
		}
		if dbr != nil {
			if s, ok := dbr.Summary(); ok && s.Error != "" {
				if !c.task.Later {
					return fmt.Errorf("the backup of this database failed part way: %s", s.Error)
				}
				// The next archive's group continues from the
				// checkpoint this one reached (or holds the database
				// whole): the chain is whole if its last group is.
				h.c.o.logf("%s: the backup of this database failed part way in this archive (%s); a later archive of the chain continues it", c.task.Target, s.Error)
			}
		}
		if winners != nil && !(chain != nil && c.task.Later) {
			failed := map[string]bool{}
			for _, f := range r.Failures {
				failed[f.ID] = true
			}
			kept, missing, total, err := winners.notWinning(ctx, c.target.Target, failed)
			if err != nil {
				return fmt.Errorf("target: compare winning revisions: %w", err)
			}
			if missing > 0 {
				c.warn(fmt.Sprintf("not restored: %d of %d documents of the archive are not on the target at all (purged there after an earlier restore, whose checkpoint this one resumed from); rerun with --no-checkpoints to write them again", missing, total))
			}
			if kept > 0 {
				c.warn(fmt.Sprintf("not rolled back: %d of %d documents of the archive have a winning revision on the target that is not the archive's (the archive's revision was already there or lost to a newer one); --replace restores the archive's state", kept, total))
			}
		}
		return nil
	}
	return src, target, end, done, nil
}

// failed says of a damaged archive that a database this restore created
// is left incomplete (or empty) on the target.
func (restoreHooks) failed(c *dbCopy, err error) error {
	if ae := (*archive.Error)(nil); c.target.Created && errors.As(err, &ae) {
		left := "incomplete"
		if c.r.DocsWritten == 0 {
			left = "empty"
		}
		return fmt.Errorf("%w (the database %s, created by this restore, is left %s on the target)", err, c.task.Target, left)
	}
	return err
}

// systemDB reports whether name is _users or _replicator, which a restore
// writes into (never deletes, never refuses): the server created them and
// uses them.
func systemDB(name string) bool { return name == "_users" || name == "_replicator" }

// replacedDBs are the databases recreate deleted, by name (nil: none).
func (c *restorer) replacedDBs() []fleet.Replaced {
	c.replacedMu.Lock()
	defer c.replacedMu.Unlock()
	out := slices.Clone(c.replaced)
	slices.SortFunc(out, func(a, b fleet.Replaced) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// recreate deletes tdb and creates it again with the archive's
// partitioned flag (the database is rolled back to the archive: a flag of
// its own would refuse the archive's documents, or leave out the
// property), its own q and n (--q/--n win), and puts its _security back at
// once, so the new database is never more open than the old one was.
func (c *restorer) recreate(ctx context.Context, tdb *couch.DB, partitioned bool) error {
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
	info, err := tdb.Info(ctx)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	r := fleet.Replaced{Name: tdb.Name(), DocCount: info.DocCount}
	if !info.DelCountUnknown {
		r.DocDelCount = &info.DelCount
	}
	if c.o.Replacing != nil {
		c.o.Replacing(r)
	} else {
		c.o.logf("%s: --replace: deleting the database (%d documents) and creating it again", tdb.Name(), r.DocCount)
	}
	srv := tdb.Server()
	if err := srv.DeleteDB(ctx, tdb.Name()); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	c.replacedMu.Lock()
	c.replaced = append(c.replaced, r)
	c.replacedMu.Unlock()
	if err := srv.CreateDBAfterDelete(ctx, tdb.Name(), couch.CreateOptions{Partitioned: partitioned, Q: q, N: n}); err != nil {
		return fmt.Errorf("target: recreate after delete: %w", err)
	}
	if sec := bytes.TrimSpace(old.Security); len(sec) > 0 && !bytes.Equal(sec, []byte("{}")) {
		if err := tdb.SetMetadata(ctx, replicate.Metadata{Security: sec}, replicate.AfterDocs); err != nil {
			return fmt.Errorf("target: put _security back: %w", err)
		}
	}
	return nil
}

// restoreTarget holds design documents back (DesignLast) and `_security`
// too: the engine sets it once the other documents are written, but a
// restore sets it last, after the design documents (setSecurity).
type restoreTarget struct {
	*replicate.DesignLast
	after *replicate.Metadata
	// reused: this run did not create the database; setSecurity then
	// warns when it replaces another `_security`: for a chain, the one
	// the database had before the chain's first step, compared at its
	// last step (later: a step before the last).
	reused bool
	warn   func(string)
	chain  *chainSteps
	later  bool
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
// Into a database that existed before, a `_security` other than the
// archive's (and not the empty default) is named in a warning once
// replaced: the names and roles it gave access lose it, the restoring
// account's own included.
func (t *restoreTarget) setSecurity(ctx context.Context) error {
	if t.after == nil {
		return nil
	}
	was := t.before(ctx)
	err := t.DesignLast.SetMetadata(ctx, *t.after, replicate.AfterDocs)
	if t.chain != nil && len(t.after.Security) > 0 {
		t.chain.secs = append(t.chain.secs, t.after.Security)
		if slices.ContainsFunc(t.chain.secs, func(s []byte) bool { return jsonx.Same(was, s) }) {
			was = nil // the chain's own, from a run of it stopped part way
		}
	}
	if err == nil && was != nil && !t.later && t.warn != nil && len(t.after.Security) > 0 && !jsonx.Same(was, t.after.Security) {
		t.warn(fmt.Sprintf("_security replaced by the archive's %s; the database had %s (whom only that gave access has lost it)", compactSecurity(t.after.Security), compactSecurity(was)))
	}
	return err
}

// before is the `_security` the database had before the restore (nil:
// none to name: the restore created it, it was open, or it cannot be
// read), read once per chain, at its first step.
func (t *restoreTarget) before(ctx context.Context) []byte {
	if !t.reused {
		return nil
	}
	if t.chain != nil && t.chain.secRead {
		return t.chain.sec
	}
	var was []byte
	if sr, ok := t.DesignLast.Target.(securityReader); ok {
		if cur, err := sr.Security(ctx); err == nil && !openSecurity(cur) {
			was = cur
		}
	}
	if t.chain != nil {
		t.chain.secRead, t.chain.sec = true, was
	}
	return was
}

// securityReader reads a database's `_security` (couch.DB).
type securityReader interface {
	Security(ctx context.Context) ([]byte, error)
}

// openSecurity says a `_security` object names nobody (CouchDB's default
// for a new database: {} or empty admins and members), or only server
// admins (CouchDB 3's admin_only default: the role _admin), who keep
// their access whatever a restore writes.
func openSecurity(b []byte) bool {
	var s struct {
		Admins, Members struct{ Names, Roles []string }
	}
	if json.Unmarshal(b, &s) != nil {
		return false
	}
	for _, r := range append(s.Admins.Roles, s.Members.Roles...) {
		if r != "_admin" {
			return false
		}
	}
	return len(s.Admins.Names)+len(s.Members.Names) == 0
}

// compactSecurity is a `_security` object on one line.
func compactSecurity(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

// chainSteps is what the steps of one database through a chain of
// archives share: the winner log of a restore into a database that held
// documents, kept open from the full archive's step to the last one's,
// where it is compared with the target (a document changed by a later
// archive wins there, not the full archive's revision).
type chainSteps struct {
	winners *winnerLog
	// created: an earlier step created the target database (a later
	// step's `_security` replaces only the chain's own).
	created bool
	// sec is the `_security` the database had before the chain's first
	// step (secRead: read), named if the last step replaces it.
	sec     []byte
	secRead bool
	// secs are the `_security` objects of the steps so far: the
	// database's before the first step may be one of them, written by an
	// earlier run of the same chain stopped part way (not named then).
	secs [][]byte
}

// close releases what a chain left by an error part way still holds.
func (s *chainSteps) close() {
	if s.winners != nil {
		s.winners.Close()
		s.winners = nil
	}
}
