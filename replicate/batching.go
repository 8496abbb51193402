package replicate

// batchRows is the number of changes rows per batch: Options.BatchSize,
// or, with Options.SizeAwareBatches, fewer when the source's documents are large on average (its
// DBInfo.Bytes over its rows), so that a batch holds about
// WriteBatchBytes of documents and attachments. Batches are what the
// workers share: 110 documents of 2 MB each in one batch of 500 rows
// would be read and written by one worker, one attachment after the
// other, while the others idle. A source that gives no size (PouchDB
// Server, an archive) keeps BatchSize.
func (r *run) batchRows() int {
	n := r.opts.BatchSize
	if !r.opts.SizeAwareBatches || r.srcInfo.Bytes <= 0 {
		return n
	}
	rows := r.srcInfo.DocCount + r.srcInfo.DelCount
	if rows <= 0 {
		return n
	}
	perRow := r.srcInfo.Bytes / rows
	if perRow <= 0 {
		return n
	}
	return int(max(1, min(int64(n), r.opts.WriteBatchBytes/perRow)))
}
