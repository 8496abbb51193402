package sofa

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/dbcopy"
	"github.com/sofadb/sofa/replicate"
)

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
