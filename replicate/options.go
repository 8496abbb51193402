package replicate

import (
	"time"

	"golang.org/x/sync/semaphore"
)

// Budget bounds the bytes of documents and attachments held in memory by
// one or several replications.
type Budget struct {
	sem  *semaphore.Weighted
	size int64
}

// NewBudget returns a budget of size bytes (DefaultMaxInflightBytes if
// size <= 0).
func NewBudget(size int64) *Budget {
	if size <= 0 {
		size = DefaultMaxInflightBytes
	}
	return &Budget{sem: semaphore.NewWeighted(size), size: size}
}

// Defaults for Options; each option's zero value selects these.
const (
	DefaultBatchSize          = 500                    // changes rows per batch
	DefaultWorkers            = 4                      // batches in flight
	DefaultFetchBatch         = 500                    // most revisions per _bulk_get request
	DefaultWriteBatchDocs     = 500                    // revisions per _bulk_docs request
	DefaultWriteBatchBytes    = 4 << 20                // bytes per _bulk_docs request (4 MiB)
	DefaultMaxInflightBytes   = 256 << 20              // document and attachment bytes held at once (256 MiB)
	DefaultCheckpointInterval = 10 * time.Second       // time between checkpoints
	DefaultStreamThreshold    = 8 << 20                // attachments this large are piped, not held (8 MiB)
	DefaultFlushInterval      = 250 * time.Millisecond // continuous: a batch is sent this long after its first row
	DefaultHeartbeat          = 10 * time.Second       // continuous: the feed's heartbeat
)

// Options tunes one replication. Zero values select the defaults above.
type Options struct {
	// BatchSize is the number of changes rows per batch (one _revs_diff
	// per batch). Zero: 500.
	BatchSize int
	// Workers is the number of batches in flight at once. Zero: 4.
	Workers int
	// SizeAwareBatches cuts batches of large documents to about
	// WriteBatchBytes (from the source's sizes.external, CouchDB) so that
	// the workers share a database of large documents. Off by default:
	// with an archive as the target it raised a backup's peak RSS past
	// the memory bound (M1: 114 MiB against 108 MiB; 76 MiB without), as
	// the archive writer holds attachments outside the in-flight budget.
	SizeAwareBatches bool
	// FetchBatch is the number of revisions per _bulk_get request (fewer when documents are large: a request aims at WriteBatchBytes). Zero: 500.
	FetchBatch int
	// WriteBatchDocs flushes the write buffer at this many revisions.
	// Zero: 500.
	WriteBatchDocs int
	// WriteBatchBytes flushes the write buffer at this many bytes of
	// bodies and inline attachments. Zero: 4 MiB.
	WriteBatchBytes int64
	// MaxInflightBytes bounds the document and attachment bytes held in
	// memory by all workers together; a single larger attachment takes the
	// whole budget alone. Zero: 256 MiB.
	MaxInflightBytes int64
	// CheckpointInterval is the time between checkpoint writes while
	// running (one is always written at the end). Zero: 10 s.
	CheckpointInterval time.Duration
	// StreamThreshold: an attachment of at least this many stored bytes is
	// piped from the source into the target's multipart PUT instead of
	// being held in memory, when both ends can. Zero: 8 MiB; negative:
	// never.
	StreamThreshold int64
	// NoCheckpoints disables reading and writing `_local` checkpoints:
	// every run starts from the beginning.
	NoCheckpoints bool
	// SourceInfo and SourceMetadata, when set, are what the caller already
	// read from the source (`GET /db`, `_security`, `_revs_limit`): the
	// engine uses them instead of asking again.
	SourceInfo     *DBInfo
	SourceMetadata *Metadata
	// TargetCreated, when set, says the caller has just created the
	// target database (empty, no checkpoint) and describes it: the engine
	// neither reads its info nor looks for checkpoints.
	TargetCreated *DBInfo
	// TargetInfo, when set, is the target's info the caller already read
	// (`GET /db` or `_dbs_info`): the engine uses it instead of asking
	// again. TargetCheckpoint, when set, is a `_local` document the
	// caller read from the target: if it is the one this replication
	// uses (its ID, without `_local/`, is the replication id), it is not
	// read again.
	TargetInfo       *DBInfo
	TargetCheckpoint *LocalDoc
	// Unclaimed says the caller wrote no claim of this copy on the
	// target database (package sofa writes none for a database expected
	// to be copied in one write: it saves a request each). The run then
	// marks the target as its own (mark.go): a run that finds no
	// checkpoint sends a checkpoint at its start seq with its first write
	// (in the same `_bulk_docs` request where the target is a
	// LocalWriter; else with PutLocal before a second write), and sends
	// no second write before that is stored, so that at most one write's
	// revisions can be on the target without this replication's
	// checkpoint. And a run that ends complete after one batch and at most
	// one write writes no final checkpoint (unless the source keeps
	// checkpoints too): its rerun reads that one batch again, which costs
	// less than the `_local` write. Ignored with NoCheckpoints.
	Unclaimed bool
	// SourceReadOnly never writes checkpoints to the source (backups,
	// `replicate --checkpoints=target`); they go to the target only, and
	// nothing is said about it. A resumed run then trusts the target's
	// checkpoint after checking that the source database is the one it
	// recorded (instance_start_time, update_seq, anchor revision).
	SourceReadOnly bool
	// StopIfSourceRecreated: when the target's checkpoint shows that the
	// source database was deleted and created again since it was written
	// (another instance_start_time, a checkpoint ahead of an integer
	// update_seq, the first run's anchor revision gone), Open and Run
	// fail with an error matching ErrSourceRecreated before writing
	// anything, instead of starting over with a warning (a copy into the
	// target would keep the old database's documents next to the new
	// one's: the caller may delete the target first, as a whole-server
	// sync with DeleteMissing does).
	StopIfSourceRecreated bool
	// CopyMetadata copies `_revs_limit` before the documents and
	// `_security` after them (new targets, --copy-security, restore).
	CopyMetadata bool
	// ContentOptions are strings naming options that change what is
	// copied; they enter the replication id.
	ContentOptions []string
	// Budget, if set, is the in-flight byte budget shared with other
	// replications (whole-server runs); MaxInflightBytes is then its size.
	// Nil: a budget of MaxInflightBytes for this replication alone.
	Budget *Budget
	// Counters, if set, receive live statistics (progress display).
	Counters *Counters
	// Warn receives one-line warnings (each said once).
	Warn func(string)
	// Debug receives verbose per-batch lines; nil: silent.
	Debug func(format string, args ...any)
	// Continuous keeps the run going after the initial catch-up: it
	// follows the source's changes feed (the Source must be a Follower:
	// `_changes?feed=continuous` with heartbeats), reconnecting with
	// backoff from the last row read whenever the feed fails, until ctx
	// is cancelled; the final checkpoint is then written and Run returns
	// ctx.Err(). Rows are cut into batches at BatchSize rows, at
	// WriteBatchBytes of documents delivered with the feed, or
	// FlushInterval after a batch's first row, whichever comes first.
	Continuous bool
	// FlushInterval (continuous runs) is the longest a changes row waits
	// in a batch that is not full before the batch is sent: the bound on
	// the lag added by batching. Zero: 250 ms; negative: no wait (a batch
	// is sent as soon as the rows the feed has delivered are taken).
	FlushInterval time.Duration
	// Heartbeat (continuous runs) is the `heartbeat` asked of the feed:
	// the server writes a newline after this much time without a change,
	// so that a dead connection is told from an idle one. Zero: 10 s.
	Heartbeat time.Duration
	// MetadataInterval (continuous runs with CopyMetadata) is the time
	// between two reads of the source's `_security` and `_revs_limit`
	// after the catch-up, a change written to the target (CouchDB
	// announces them in no feed; each read is two GETs). Zero or negative:
	// never (they are set once, after the catch-up).
	MetadataInterval time.Duration
	// Log receives one-line notices of a continuous run: the feed lost and
	// reconnecting, a batch retried, falling behind, caught up. Nil:
	// silent.
	Log func(string)
	// Observer is told of feed rows, acknowledged batches, checkpoints,
	// reconnects and caught-up edges (metrics, lag); nil: NopObserver.
	Observer Observer
}

func (o *Options) defaults() {
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.FetchBatch <= 0 {
		o.FetchBatch = DefaultFetchBatch
	}
	if o.WriteBatchDocs <= 0 {
		o.WriteBatchDocs = DefaultWriteBatchDocs
	}
	if o.WriteBatchBytes <= 0 {
		o.WriteBatchBytes = DefaultWriteBatchBytes
	}
	if o.MaxInflightBytes <= 0 {
		o.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if o.StreamThreshold == 0 {
		o.StreamThreshold = DefaultStreamThreshold
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = DefaultCheckpointInterval
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.Observer == nil {
		o.Observer = NopObserver{}
	}
	if o.Budget == nil {
		o.Budget = NewBudget(o.MaxInflightBytes)
	}
	o.MaxInflightBytes = o.Budget.size
	if o.Counters == nil {
		o.Counters = &Counters{}
	}
}
