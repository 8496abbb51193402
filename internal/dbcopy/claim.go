// Package dbcopy holds the per-database mechanics of package sofa's
// per-database job: target claims, result bookkeeping, progress feeding.
package dbcopy

import (
	"context"
	"errors"
	"fmt"

	"github.com/sofadb/sofa/replicate"
)

// A whole-server run claims each target database it starts writing into
// with a `_local` document, before any document is written. The
// replication checkpoint cannot serve for that: a run interrupted before
// its first checkpoint (or whose last write landed but was never
// acknowledged) leaves documents and no checkpoint, and its rerun would
// then refuse the database as "exists and is not empty".

// Local is a target database that keeps `_local` documents.
type Local interface {
	GetLocal(ctx context.Context, id string) ([]byte, error)
	PutLocal(ctx context.Context, id string, body []byte) error
	Name() string
}

// claimID names the claim of the database fed from source.
func claimID(source replicate.DBInfo, tdb Local) string {
	return "sofa-claim-" + replicate.ReplicationID(source.Identity, tdb.Name())
}

// ClaimTarget writes the claim unless it exists.
func ClaimTarget(ctx context.Context, source replicate.DBInfo, tdb Local) error {
	id := claimID(source, tdb)
	if _, err := tdb.GetLocal(ctx, id); err == nil {
		return nil
	} else if !errors.Is(err, replicate.ErrNotFound) {
		return fmt.Errorf("target: %w", err)
	}
	if err := tdb.PutLocal(ctx, id, []byte(`{"claimed_by":"sofa replicate"}`)); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	return nil
}

// ClaimNew writes the claim of a database this run just created (no
// claim can exist yet).
func ClaimNew(ctx context.Context, source replicate.DBInfo, tdb Local) error {
	if err := tdb.PutLocal(ctx, claimID(source, tdb), []byte(`{"claimed_by":"sofa replicate"}`)); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	return nil
}

// Claimed reports whether an earlier run from source claimed tdb.
func Claimed(ctx context.Context, source replicate.DBInfo, tdb Local) bool {
	_, err := tdb.GetLocal(ctx, claimID(source, tdb))
	return err == nil
}

// AsInterrupted returns err so that it matches ctx.Err() once ctx is done:
// an error caused by the cancellation (whatever wrapped it with %v on the
// way) then marks the database interrupted, not failed.
func AsInterrupted(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// ErrNotEmpty marks a target database that holds other data. _users is
// exempt: every server has one (with its _design/_auth), and its documents
// merge by revision like any replication.
var ErrNotEmpty = errors.New("target database exists and is not empty")
