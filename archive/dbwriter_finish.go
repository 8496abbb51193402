package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"os"

	"github.com/sofadb/sofa/replicate"
)

// Close flushes the pending chunk, writes the end member (seq reached,
// counts, final metadata) and hands the group to the archive. Every
// WriteDocs call must have returned. Calling Close again is a no-op.
func (d *DBWriter) Close() error { return d.finish("") }

// Abort ends the group like Close but marks the database's backup as
// failed with reason; a restore reports it. Revisions already written stay
// in the archive.
func (d *DBWriter) Abort(reason string) error { return d.finish(reason) }

func (d *DBWriter) finish(reason string) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return d.err
	}
	d.closed = true
	d.forgetRevsLocked()
	err := d.startLocked()
	if d.packs() {
		return d.finishPacked(err, reason)
	}
	if err == nil && len(d.buf) > 0 {
		err = d.queueChunkLocked(context.Background())
	}
	direct, err := d.settle(err)
	d.mu.Lock()
	sum := d.summaryLocked(reason)
	d.mu.Unlock()
	if err == nil {
		raw, jerr := d.endJSON(sum)
		if jerr != nil {
			err = jerr
		} else {
			err = d.emit(endName(d.dir), raw, int64(len(raw)), sha256.Sum256(raw), true)
		}
	}
	return d.handOver(err, sum, direct)
}

// settle (d.mu held, released) drops the pending buffer, waits until
// every chunk or pack handed to the pool is written, and takes err or
// the first job error. From here on the group is not promoted: its
// counts are final and its members go where direct says.
func (d *DBWriter) settle(err error) (direct bool, _ error) {
	d.w.pool.recycle(d.buf, true)
	d.buf = nil
	tail := d.tail
	d.mu.Unlock()
	if tail != nil {
		<-tail
	}
	if err == nil {
		err = d.jobError()
	}
	d.spoolMu.Lock()
	d.closing = true
	direct = d.direct
	d.spoolMu.Unlock()
	return direct, err
}

// summaryLocked fills the group's summary from what was written (d.mu
// held): the counts of the members emitted and, for a pack not yet cut,
// collected (format version 3).
func (d *DBWriter) summaryLocked(reason string) DBSummary {
	d.summary.Seq = d.seq
	// Checkpoints carry forward: a database unchanged since the previous
	// archive gets no new one, and keeps the previous archive's, so the
	// next incremental starts from there too (not from scratch).
	d.summary.Checkpoints = d.checkpoints
	if len(d.checkpoints) == 0 && len(d.locals) > 0 {
		d.summary.Checkpoints = map[string]json.RawMessage{}
		for id, b := range d.locals {
			d.summary.Checkpoints[id] = json.RawMessage(b)
		}
	}
	if e := d.endState; e != nil {
		d.summary.Seq, d.summary.Checkpoints = e.Seq, e.Checkpoints
	}
	d.summary.Metadata = d.meta
	d.summary.Error = reason
	d.summary.Blobs, d.summary.BlobBytes = d.nblobs.Load(), d.blobBytes.Load()
	d.summary.Chunks, d.summary.DocBytes = int(d.chunks.Load()), d.docBytes.Load()
	if d.packs() && len(d.buf) > 0 {
		d.summary.Chunks++
		d.summary.DocBytes += int64(len(d.buf))
	}
	d.summary.StoredBytes = d.storedBytes.Load()
	return d.summary
}

// finishPacked ends a group of format version 3 (d.mu held, released):
// its last pack holds the pending records and the end member, whose
// stored_bytes is 0 (the group's stored bytes include that pack's: the
// manifest and index give them, and a reader counts them).
func (d *DBWriter) finishPacked(err error, reason string) error {
	var sum DBSummary
	if err == nil {
		sum = d.summaryLocked(reason)
		sum.StoredBytes = 0
		raw, jerr := d.endJSON(sum)
		if err = jerr; err == nil {
			err = d.queuePackLocked(context.Background(), raw)
		}
	}
	direct, err := d.settle(err)
	d.mu.Lock()
	if err != nil {
		sum = d.summaryLocked(reason)
	}
	sum.StoredBytes = d.storedBytes.Load()
	d.summary = sum
	d.mu.Unlock()
	return d.handOver(err, sum, direct)
}

// handOver flushes the group's spool, records a failure, and hands the
// group to the archive (finishDB).
func (d *DBWriter) handOver(err error, sum DBSummary, direct bool) error {
	if err == nil && !direct && d.stw != nil {
		d.spoolMu.Lock()
		err = d.stw.Flush()
		d.spoolMu.Unlock()
	}
	if err != nil {
		d.mu.Lock()
		d.err = err
		d.mu.Unlock()
		d.w.mu.Lock()
		d.w.fail(err)
		d.w.mu.Unlock()
	}
	if ferr := d.w.finishDB(d, sum, direct); err == nil {
		err = ferr
	}
	return err
}

// endJSON is the content of the group's end.json: the summary (which the
// manifest holds whole) without the checkpoints, which only the
// manifest's copy is read for (ReadSince), and without metadata equal to
// meta.json's, which readers fall back to. A tiny database's end.json
// then fits one 512-byte tar block.
func (d *DBWriter) endJSON(sum DBSummary) ([]byte, error) {
	sum.Checkpoints = nil
	if m, _ := json.Marshal(metaToJSON(sum.Metadata)); d.startMeta != nil && bytes.Equal(m, d.startMeta) {
		sum.Metadata = replicate.Metadata{}
	}
	raw, err := json.Marshal(sum)
	return append(raw, '\n'), err
}

func (d *DBWriter) removeSpool() {
	if d.spool != nil {
		_ = d.spool.Close()
		_ = os.Remove(d.spool.Name())
		d.spool = nil
	}
}
