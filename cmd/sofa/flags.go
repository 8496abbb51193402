package main

import (
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/pflag"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/replicate"
)

// engineFlags are the tuning options of the one-database engine.
type engineFlags struct {
	workers         int
	batchSize       int
	fetchBatch      int
	writeDocs       int
	writeBytes      int64
	maxInflight     int64
	checkpointEvery time.Duration
	noCheckpoints   bool
	streamThreshold int64
}

func (f *engineFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.workers, "workers", replicate.DefaultWorkers, "batches in flight at once per database")
	fs.IntVar(&f.batchSize, "batch-size", replicate.DefaultBatchSize, "changes rows per batch (one _revs_diff each)")
	fs.IntVar(&f.fetchBatch, "fetch-batch", replicate.DefaultFetchBatch, "most revisions per _bulk_get request")
	fs.IntVar(&f.writeDocs, "write-batch-docs", replicate.DefaultWriteBatchDocs, "flush the write buffer at this many revisions")
	fs.Int64Var(&f.writeBytes, "write-batch-bytes", replicate.DefaultWriteBatchBytes, "flush the write buffer at this many bytes")
	fs.Int64Var(&f.maxInflight, "max-inflight-bytes", replicate.DefaultMaxInflightBytes, "bytes of documents and attachments held in memory at once, shared by all databases in flight (default 256 MiB)")
	fs.DurationVar(&f.checkpointEvery, "checkpoint-interval", replicate.DefaultCheckpointInterval, "time between checkpoints while running")
	fs.Int64Var(&f.streamThreshold, "stream-threshold", replicate.DefaultStreamThreshold, "attachments of at least this many bytes are piped from source to target, never held in memory (-1: never)")
	fs.BoolVar(&f.noCheckpoints, "no-checkpoints", false, "neither read nor write _local checkpoints (always start from the beginning)")
}

// validate refuses negative sizes and counts (zero selects the default).
func (f *engineFlags) validate() error {
	for name, v := range map[string]int64{"workers": int64(f.workers), "batch-size": int64(f.batchSize),
		"fetch-batch": int64(f.fetchBatch), "write-batch-docs": int64(f.writeDocs), "write-batch-bytes": f.writeBytes,
		"max-inflight-bytes": f.maxInflight, "checkpoint-interval": int64(f.checkpointEvery)} {
		if v < 0 {
			return usageErr("--%s must not be negative (0 selects the default)", name)
		}
	}
	return nil
}

func (f *engineFlags) options() replicate.Options {
	return replicate.Options{
		Workers: f.workers, BatchSize: f.batchSize, FetchBatch: f.fetchBatch,
		WriteBatchDocs: f.writeDocs, WriteBatchBytes: f.writeBytes,
		MaxInflightBytes: f.maxInflight, CheckpointInterval: f.checkpointEvery,
		NoCheckpoints: f.noCheckpoints, StreamThreshold: f.streamThreshold,
	}
}

// setMemoryLimit sets the Go runtime's soft memory limit from the
// in-flight budget (budget + overhead), unless GOMEMLIMIT is set, so the
// garbage collector works harder before the process grows past it.
func (f *engineFlags) setMemoryLimit(extra int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	budget := f.maxInflight
	if budget <= 0 {
		budget = replicate.DefaultMaxInflightBytes
	}
	debug.SetMemoryLimit(budget + int64(max(f.workers, 1))*3*max(f.writeBytes, replicate.DefaultWriteBatchBytes) + extra + 32<<20)
}

// clientFlags are the HTTP client's options.
type clientFlags struct {
	requestTimeout time.Duration
	retryTime      time.Duration
	max429Wait     time.Duration
	maxConns       int
	changesPage    int
}

func (f *clientFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&f.requestTimeout, "request-timeout", couch.DefaultAttemptTimeout, "time limit of one HTTP attempt")
	fs.DurationVar(&f.retryTime, "retry-time", couch.DefaultRetryTime, "total time one request may spend retrying network errors, timeouts and 5xx")
	fs.DurationVar(&f.max429Wait, "max-429-wait", couch.DefaultMax429Wait, "total time one request may wait on 429/503 rate limiting")
	fs.IntVar(&f.maxConns, "max-conns", couch.DefaultMaxConns, "TCP connections per server")
	fs.IntVar(&f.changesPage, "changes-page", couch.DefaultChangesPage, "_changes rows asked per request (-1: the whole feed in one request)")
}

func (f *clientFlags) options() couch.Options {
	return couch.Options{AttemptTimeout: f.requestTimeout, RetryTime: f.retryTime, Max429Wait: f.max429Wait, MaxConns: f.maxConns, ChangesPage: f.changesPage}
}
