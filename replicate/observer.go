package replicate

import "time"

// Observer is told what one replication does, as it happens: the hook that
// metrics (Prometheus counters and the lag histogram of a continuous run)
// and "behind / caught up" log lines are built on. Calls come from the
// engine's goroutines, concurrently; an implementation must be safe for
// that and must not block (count, then return). A nil Options.Observer
// means NopObserver.
type Observer interface {
	// ChangesSeen reports n rows read from the source's changes feed
	// (`_changes`). pending is the feed's `pending` count after them (rows
	// not yet sent), -1 when the server did not say.
	ChangesSeen(n int, pending int64)
	// BatchWritten reports one batch acknowledged by the target: docs
	// revisions written (docs_written), failures rejected
	// (doc_write_failures), and lag, the time from the batch's first row
	// appearing on the feed to the acknowledgement of its last write.
	BatchWritten(docs, failures int, lag time.Duration)
	// Checkpointed reports a checkpoint recorded on the target at seq.
	Checkpointed(seq string)
	// Reconnected reports that the changes feed failed with err and was
	// opened again from the last row read (continuous runs).
	Reconnected(err error)
	// CaughtUp reports that every change the source had when the feed
	// last said so (`pending` 0, or the end of a non-continuous feed) is
	// written; behind reports the opposite edge, when new changes arrive
	// after CaughtUp. Called on edges only, not per batch.
	CaughtUp(caughtUp bool)
}

// NopObserver ignores everything.
type NopObserver struct{}

func (NopObserver) ChangesSeen(int, int64)               {}
func (NopObserver) BatchWritten(int, int, time.Duration) {}
func (NopObserver) Checkpointed(string)                  {}
func (NopObserver) Reconnected(error)                    {}
func (NopObserver) CaughtUp(bool)                        {}
