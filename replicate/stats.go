package replicate

import (
	"sync"
	"sync/atomic"
)

// Stats are the counters of one replication, in CouchDB's terms.
type Stats struct {
	ChangesRead      int64 `json:"changes_read"`        // changes rows read
	MissingChecked   int64 `json:"missing_checked"`     // leaf revisions checked: offered to _revs_diff, or known missing without asking
	MissingFound     int64 `json:"missing_found"`       // revisions the target lacked (said by _revs_diff, or known)
	DocsRead         int64 `json:"docs_read"`           // revisions read from the source
	DocsWritten      int64 `json:"docs_written"`        // revisions accepted by the target
	DocWriteFailures int64 `json:"doc_write_failures"`  // revisions not written (each listed)
	Bytes            int64 `json:"bytes"`               // body and attachment bytes written
	AttachmentsRead  int64 `json:"attachments_read"`    // attachments whose bytes were read
	AttachmentsSkip  int64 `json:"attachments_skipped"` // attachments sent as stubs (target had them)
	AttachmentsPiped int64 `json:"attachments_piped"`   // of those read, piped source -> target without being held
	Batches          int64 `json:"batches"`             // batches completed
	Checkpoints      int64 `json:"checkpoints"`         // checkpoint writes
}

// Counters are live Stats updated by a running replication; read them
// from any goroutine (progress display) with Snapshot.
type Counters struct {
	changesRead, missingChecked, missingFound, docsRead, docsWritten  atomic.Int64
	docWriteFailures, bytes, attsRead, attsSkip, batches, checkpoints atomic.Int64
	attsPiped                                                         atomic.Int64
}

// Snapshot returns the current values.
func (c *Counters) Snapshot() Stats {
	if c == nil {
		return Stats{}
	}
	return Stats{
		ChangesRead: c.changesRead.Load(), MissingChecked: c.missingChecked.Load(),
		MissingFound: c.missingFound.Load(), DocsRead: c.docsRead.Load(),
		DocsWritten: c.docsWritten.Load(), DocWriteFailures: c.docWriteFailures.Load(),
		Bytes: c.bytes.Load(), AttachmentsRead: c.attsRead.Load(), AttachmentsSkip: c.attsSkip.Load(), AttachmentsPiped: c.attsPiped.Load(),
		Batches: c.batches.Load(), Checkpoints: c.checkpoints.Load(),
	}
}

// failureList collects DocErrors from many workers.
type failureList struct {
	mu   sync.Mutex
	list []DocError
}

func (f *failureList) add(errs ...DocError) {
	if len(errs) == 0 {
		return
	}
	f.mu.Lock()
	f.list = append(f.list, errs...)
	f.mu.Unlock()
}

func (f *failureList) all() []DocError {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]DocError(nil), f.list...)
}

func (f *failureList) reset() {
	f.mu.Lock()
	f.list = nil
	f.mu.Unlock()
}
