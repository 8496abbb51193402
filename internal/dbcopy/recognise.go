package dbcopy

import (
	"context"
	"errors"
	"fmt"

	"github.com/sofadb/sofa/replicate"
)

// A database expected to be copied in one write gets no claim (package
// sofa's prepareTarget): the engine marks it with its first write
// instead (replicate.Options.Unclaimed), and a run stopped before that
// mark was stored leaves at most one write's revisions on the target.
// A later run that finds neither checkpoint nor claim recognises them
// by reading them back (Recognise).

// RevsDiffer is a source that says which revisions it lacks
// (`_revs_diff`, as couch.DB does).
type RevsDiffer interface {
	RevsDiff(ctx context.Context, revs map[string][]string) (map[string]replicate.Missing, error)
}

// OneWrite is the most documents (doc_count + doc_del_count) of a source
// database whose copy is expected to take one write with opts: one batch
// of changes rows, one write of revisions (a document with conflicts has
// more than one, so this is an expectation, not a promise: the engine's
// mark covers the rest). Zero when the copy keeps no checkpoints (no
// mark can be left).
func OneWrite(opts replicate.Options) int64 {
	if opts.NoCheckpoints {
		return 0
	}
	return int64(min(orDefault(opts.BatchSize, replicate.DefaultBatchSize), orDefault(opts.WriteBatchDocs, replicate.DefaultWriteBatchDocs)))
}

// RecogniseMax is the most documents a target database may hold to be
// recognised as an unclaimed copy (Recognise): one write's revisions
// with opts.
func RecogniseMax(opts replicate.Options) int64 {
	return int64(orDefault(opts.WriteBatchDocs, replicate.DefaultWriteBatchDocs))
}

func orDefault(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// errTooMany stops the read of a target larger than Recognise's limit.
var errTooMany = errors.New("more documents than a copy leaves unmarked")

// Recognise reports whether the target database tdb holds only revisions
// that source has: every leaf revision its changes feed lists
// (style=all_docs, deleted leaves included) is known to source
// (`_revs_diff` finds none missing). Such a database is a partial or
// whole copy of source, which a copy may write into: an earlier run of
// it that was stopped before its first checkpoint, most likely. One
// holding a revision source lacks is someone else's data: false. tdb is
// read to at most limit documents (false past them): two requests, one
// on each side.
func Recognise(ctx context.Context, tdb replicate.Source, source RevsDiffer, limit int64) (bool, error) {
	revs := map[string][]string{}
	var n int64
	err := tdb.Changes(ctx, nil, func(c replicate.Change) error {
		if n++; n > limit {
			return errTooMany
		}
		revs[c.ID] = append(revs[c.ID], c.Revs...)
		return nil
	})
	if errors.Is(err, errTooMany) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("target: %w", err)
	}
	if len(revs) == 0 {
		return true, nil
	}
	missing, err := source.RevsDiff(ctx, revs)
	if err != nil {
		return false, fmt.Errorf("source: %w", err)
	}
	for _, m := range missing {
		if len(m.Missing) > 0 {
			return false, nil
		}
	}
	return true, nil
}
