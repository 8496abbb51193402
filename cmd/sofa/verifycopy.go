package main

import (
	"context"
	"fmt"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/verify"
)

// Values of `replicate --verify` (whole-server mode).
const (
	verifyNone  = "none"
	verifyCheap = "cheap"
	verifyFull  = "full"
)

func validVerifyMode(m string) error {
	switch m {
	case verifyNone, verifyCheap, verifyFull:
		return nil
	}
	return usageErr("--verify %q: want cheap, full or none", m)
}

// verifyCopy checks one database after a whole-server copy that reported
// no failures. cheap compares doc counts and goes on to a full comparison
// only on a mismatch; full always compares every leaf revision. A copy
// found different is copied once more from the beginning of the source's
// changes feed (checkpoints ignored, so revisions the first pass skipped
// are found again; _revs_diff keeps it cheap) and compared again; what
// still differs is reported per document in r.Failures (error
// "verify_<kind>"), which marks the database partial. The target may hold
// more than the source (--reuse-existing): only what it lacks counts.
// srcCounts, when not nil, are the source's doc counts at the seq the
// copy reached (see verifyCounts).
func (rc *replicateCmd) verifyCopy(ctx context.Context, sdb, tdb *couch.DB, opts replicate.Options, srcCounts *replicate.DBInfo, r *fleet.DBResult) error {
	switch rc.verifyMode {
	case verifyNone:
		return nil
	case verifyCheap:
		err := rc.verifyCounts(ctx, sdb, tdb, srcCounts)
		if err == nil {
			return nil
		}
		rc.logf("%s: %v; comparing every document", sdb.Name(), err)
	}
	vopts := verify.Options{Mode: verify.Full, Metadata: true, AllowExtra: true,
		LenientRevpos: tdb.Server().Vendor == couch.VendorPouchDB}
	rep, err := verify.Compare(ctx, sdb, tdb, vopts)
	if err != nil {
		return err
	}
	if rep.Equal() {
		return nil
	}
	rc.logf("%s: %s after the copy; copying it once more", sdb.Name(), rep)
	opts.NoCheckpoints = true
	opts.Counters = &replicate.Counters{}
	res, err := replicate.Run(ctx, sdb, tdb, opts)
	fillResult(r, res)
	if err != nil {
		return err
	}
	if rep, err = verify.Compare(ctx, sdb, tdb, vopts); err != nil {
		return err
	}
	for _, d := range rep.Differences {
		r.Failures = append(r.Failures, replicate.DocError{ID: d.ID, Rev: d.Rev, Error: "verify_" + string(d.Kind), Reason: d.Detail})
	}
	if n := rep.Truncated(); n > 0 {
		r.Failures = append(r.Failures, replicate.DocError{Error: "verify", Reason: fmt.Sprintf("%d more differences not listed (run sofa verify --full)", n)})
	}
	return nil
}
