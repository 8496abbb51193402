package sofa

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/verify"
)

// check verifies one database after a copy that reported no failures,
// as far as the pair of endpoints allows (their ServerCaps):
//
//   - a target that counts what it stored (StoredCounts: an archive being
//     written) is checked against the source's counts without a request;
//     it cannot take revisions twice, so a mismatch is reported, not
//     copied again;
//   - a target that can be read back (Counts: a CouchDB server): VerifyCheap
//     compares doc counts and goes on to a full comparison only on a
//     mismatch; VerifyFull always compares every document and leaf
//     revision. A copy found different is copied once more from the
//     start of the source's changes (checkpoints ignored, so revisions
//     the first pass skipped are found again; _revs_diff keeps it cheap)
//     and compared again; what still differs is reported per document in
//     r.Failures (error "verify_<kind>"), which marks the database
//     partial. The comparison needs the source read again: a source read
//     once (an archive read in order) is checked by its counts only.
//
// The target may hold more than the source (ReuseExisting): only what it
// lacks counts. The source's counts are those read before the copy: a
// lower bound of what the target must hold, since the copy read the
// source's changes to their end after reading them (no second GET /db:
// comparing the seq reached with the update_seq read with the counts does
// not work on CouchDB, which spells one position in several ways and
// counts _security writes in update_seq).
func (j *pairJob) check(ctx context.Context, c *dbCopy, src replicate.Source, opts replicate.Options) error {
	if j.verify == VerifyNone {
		return nil
	}
	caps := j.tgt.ServerCaps()
	if sc, ok := c.target.Target.(replicate.StoredCounter); ok && caps.StoredCounts {
		checkStored(ctx, sc, src, c.sinfo, c.r)
		return nil
	}
	tdb, ok := c.target.Target.(replicate.Source)
	if !caps.Counts || !ok {
		return nil
	}
	name := c.task.Target
	if j.verify == VerifyCheap {
		err := verifyCounts(ctx, c.target.Target, c.sinfo)
		if err == nil {
			return nil
		}
		j.rc.logf("%s: %v; comparing every document", name, err)
	}
	vopts := verify.Options{Mode: verify.Full, Metadata: true, AllowExtra: true, LenientRevpos: j.lenientRevpos, DoubleNumbers: j.lenientRevpos}
	compare := func() (*verify.Report, error) {
		a, done, err := j.rereadSource(ctx, c.task, src, true)
		if err != nil || a == nil {
			return nil, err
		}
		defer done()
		return verify.Compare(ctx, a, tdb, vopts)
	}
	rep, err := compare()
	if err != nil {
		return err
	}
	if rep == nil {
		j.rc.logf("%s: the source can be read only once (in order): checked by its counts only", name)
		return nil
	}
	defer func() { warnOtherWinners(c, rep) }()
	if rep.Equal() {
		return nil
	}
	j.rc.logf("%s: %s after the copy; copying it once more", name, rep)
	again, done, err := j.rereadSource(ctx, c.task, src, false)
	if err != nil {
		return err
	}
	opts.NoCheckpoints = true
	// What was read of the target before the first copy is stale now.
	opts.TargetCreated, opts.TargetInfo, opts.TargetCheckpoint = nil, nil, nil
	opts.Counters = &replicate.Counters{}
	err = j.copyOnce(ctx, c, again, opts, true)
	done()
	if err != nil {
		return err
	}
	if rep, err = compare(); err != nil {
		return err
	}
	for _, d := range rep.Differences {
		c.r.Failures = append(c.r.Failures, replicate.DocError{ID: d.ID, Rev: d.Rev, Error: "verify_" + string(d.Kind), Reason: d.Detail})
	}
	if n := rep.Truncated(); n > 0 {
		c.r.Failures = append(c.r.Failures, replicate.DocError{Error: "verify", Reason: fmt.Sprintf("%d more differences not listed (run sofa verify --full)", n)})
	}
	return nil
}

// rereadSource returns the task's source to read it once more: src
// itself when it can be read again, else opened again from its server
// (ServerCaps.ReadOnce), for a comparison spooled (verify.Spooled: the
// revisions come with the changes) — nil when it has no server (it was
// opened by the caller). done releases it.
func (j *pairJob) rereadSource(ctx context.Context, t dbTask, src replicate.Source, forCompare bool) (replicate.Source, func(), error) {
	ss := j.sourceServer(t)
	switch {
	case ss == nil:
		return nil, func() {}, nil
	case !ss.ServerCaps().ReadOnce:
		return src, func() {}, nil
	}
	s, err := ss.OpenSource(ctx, t.Source, j.sourceReadOnly)
	if err != nil {
		return nil, nil, err
	}
	if !forCompare {
		return s, func() { closeSource(s) }, nil
	}
	sp, err := verify.NewSpooled(s, "")
	if err != nil {
		closeSource(s)
		return nil, nil, err
	}
	return sp, func() { sp.Close(); closeSource(s) }, nil
}

// verifyCounts is the cheap check after each database: the target holds
// at least the source's live and deleted documents, and at least its
// live ones (the source may have grown meanwhile, the target may have
// had more). s are the source's counts read before the copy.
func verifyCounts(ctx context.Context, tdb replicate.Target, s replicate.DBInfo) error {
	// Batched with the other databases' checks: one _dbs_info for many
	// where the server has it.
	var t replicate.DBInfo
	var err error
	if b, ok := tdb.(batchedInfo); ok {
		t, err = b.InfoBatched(ctx)
	} else {
		t, err = tdb.Info(ctx)
	}
	if err != nil {
		return fmt.Errorf("verify: target: %w", err)
	}
	if t.DelCountUnknown || s.DelCountUnknown {
		// PouchDB Server reports no doc_del_count: its absence is not a
		// zero, compare live documents only.
		if t.DocCount < s.DocCount {
			return fmt.Errorf("verify: target holds %d live documents, source %d (deleted ones not reported by one side)", t.DocCount, s.DocCount)
		}
		return nil
	}
	if t.DocCount+t.DelCount < s.DocCount+s.DelCount {
		return fmt.Errorf("verify: target holds %d documents (%d deleted), source %d (%d deleted)", t.DocCount, t.DelCount, s.DocCount, s.DelCount)
	}
	if t.DocCount < s.DocCount {
		// as many documents, fewer live: some live at the source are
		// deleted on the target (found by a tester: said ok)
		return fmt.Errorf("verify: target holds %d live documents, source %d", t.DocCount, s.DocCount)
	}
	return nil
}

// checkStored compares what a target stored with the source's counts
// read before the copy: every document then counted, live or deleted,
// has at least one leaf revision, and each reached the target. A
// mismatch is a failure of the whole database (no document named). An
// incremental copy, holding only changes, is not compared. Only on a
// mismatch the source's counts are read once more: a source that now
// counts no more documents than were stored lost some during the copy
// (purged, or the database deleted and created again), which is no
// failure of the copy.
func checkStored(ctx context.Context, sc replicate.StoredCounter, src replicate.Source, s replicate.DBInfo, r *fleet.DBResult) {
	leaves, whole := sc.Stored()
	want := s.DocCount + s.DelCount // PouchDB Server: DelCount unknown, 0
	if !whole || leaves >= want {
		return
	}
	reason := fmt.Sprintf("%d leaf revisions stored, fewer than the %d documents the source counted before the copy", leaves, want)
	if now, err := src.Info(ctx); err == nil {
		if n := now.DocCount + now.DelCount; n <= leaves {
			return
		} else if n < want {
			reason += fmt.Sprintf(" (%d after it: some were purged meanwhile)", n)
		}
	}
	r.Failures = append(r.Failures, replicate.DocError{Error: "verify", Reason: reason})
}

// warnOtherWinners warns of the documents a full check found deleted at
// the source and live on the target, or the reverse, because the target
// holds leaves of its own (verify.Report.OtherWinners): not a failure
// (a target may hold more), but what its readers see differs.
func warnOtherWinners(c *dbCopy, rep *verify.Report) {
	if rep == nil || rep.OtherWinners == 0 {
		return
	}
	what := fmt.Sprintf("%d documents are", rep.OtherWinners)
	if rep.OtherWinners == 1 {
		what = "1 document is"
	}
	c.warn(fmt.Sprintf("%s deleted on one side and live on the other because the target holds revisions of its own (a conflict CouchDB picks as the winner there, or a history stemmed by the source's _revs_limit, which a copy writes as a new branch): first %s; sofa verify lists them",
		what, quotedIDs(rep.OtherWinnerIDs)))
}

// quotedIDs lists ids quoted, comma-separated.
func quotedIDs(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = strconv.Quote(id)
	}
	return strings.Join(q, ", ")
}
