package archive

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sofadb/sofa/replicate"
)

// WriteDocs appends revisions to the database's pending chunk, writing
// each attachment's bytes first as a blob member unless the archive holds
// them already. Revisions that cannot be stored as they are come back as
// DocErrors: an attachment without bytes (a stub), a digest that does not
// match the bytes, a body that is not one JSON object. An error means the
// archive stream failed; it is sticky.
func (d *DBWriter) WriteDocs(ctx context.Context, docs []*replicate.Doc) ([]replicate.DocError, error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, &Error{Err: ErrClosed}
	}
	err := d.startLocked()
	d.mu.Unlock()
	if err == nil {
		err = d.jobError()
	}
	if err == nil {
		// the archive's stream failed (a closed pipe, a full disk, a
		// lost object store): no database goes on reading its source
		// into a spool that can never be written
		err = d.w.brokenErr()
	}
	if err != nil {
		return nil, err
	}
	var rejected []replicate.DocError
	for _, doc := range docs {
		key := d.w.revKey(doc.ID, doc.Rev)
		d.mu.Lock()
		again := d.storedLocked(key)
		d.mu.Unlock()
		if again {
			continue // sent again by the source (see replays.go): stored once
		}
		body, sums, form, derr := d.prepare(doc)
		if derr != nil {
			rejected = append(rejected, *derr)
			continue
		}
		for i, a := range doc.Atts {
			if err := d.ensureBlob(sums[i], a); err != nil {
				return rejected, err
			}
		}
		d.mu.Lock()
		if d.storedLocked(key) { // by another call meanwhile
			d.mu.Unlock()
			continue
		}
		d.rememberLocked(key)
		d.buf = appendRecord(d.buf, doc, body, sums, form)
		d.summary.Revisions++
		d.summary.Attachments += int64(len(doc.Atts))
		if doc.Deleted {
			d.summary.Tombstones++
		}
		if len(d.buf) >= d.w.chunk {
			cut := d.queueChunkLocked
			if d.packs() {
				cut = func(ctx context.Context) error { return d.queuePackLocked(ctx, nil) }
			}
			if err := cut(ctx); err != nil {
				d.mu.Unlock()
				return rejected, err
			}
		}
		d.mu.Unlock()
	}
	return rejected, nil
}

// prepare checks one revision and returns its body (trimmed of outer
// whitespace), the SHA-256 of each attachment's stored bytes and the
// record form (which fields the body makes redundant).
func (d *DBWriter) prepare(doc *replicate.Doc) ([]byte, [][32]byte, recordForm, *replicate.DocError) {
	reject := func(e, reason string) ([]byte, [][32]byte, recordForm, *replicate.DocError) {
		return nil, nil, recordForm{}, &replicate.DocError{ID: doc.ID, Rev: doc.Rev, Error: e, Reason: reason}
	}
	body := bytes.TrimSpace(doc.Body)
	if doc.ID == "" || doc.Rev == "" {
		return reject("bad_request", "revision without _id or _rev")
	}
	var form recordForm
	env, err := scanEnvelope(body)
	switch {
	case err == nil:
		form.lean, form.omitRevs, form.omitDeleted = leanForm(doc, env)
	case len(body) < 2 || body[0] != '{' || !jsontext.Value(body).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)):
		return reject("bad_request", "body is not one JSON object")
	}
	sums := make([][32]byte, len(doc.Atts))
	for i, a := range doc.Atts {
		if a.Stub || a.Data == nil {
			return reject("attachment_missing", fmt.Sprintf("attachment %q has no bytes (stub)", a.Name))
		}
		if b64, ok := strings.CutPrefix(a.Digest, "md5-"); ok {
			m := md5.Sum(a.Data)
			if base64.StdEncoding.EncodeToString(m[:]) != b64 {
				return reject("digest_mismatch", fmt.Sprintf("attachment %q: bytes do not match %s", a.Name, a.Digest))
			}
		}
		sums[i] = sha256.Sum256(a.Data)
	}
	return body, sums, form, nil
}

// queueChunkLocked hands the pending records (d.mu held) to the archive's
// chunk pool as the next doc chunk. It waits for a free pool slot, so the
// chunks held in memory stay bounded; other WriteDocs calls on this
// database wait meanwhile. Chunks take slots in number order, and each is
// written only after the one before it: the group's chunks appear in
// order, and the oldest chunk of every database always holds a slot.
func (d *DBWriter) queueChunkLocked(ctx context.Context) error {
	pool := d.w.pool
	if err := pool.acquire(ctx); err != nil {
		return err
	}
	raw := d.buf
	d.buf = pool.buffer()
	d.nchunk++
	prev, done := d.tail, make(chan struct{})
	d.tail = done
	go d.writeChunk(d.nchunk, raw, prev, done)
	return nil
}

// writeChunk compresses doc chunk number n, waits until chunk n-1 is
// written (prev closed; nil for the first), writes it and closes done. It
// holds a pool slot, released on return before done is closed.
func (d *DBWriter) writeChunk(n int, raw []byte, prev, done chan struct{}) {
	// The slot is released before done is closed (defers run last
	// first), so that whoever waits on done, Close included, finds it
	// free.
	defer close(done)
	defer d.w.pool.release()
	codec := d.w.opts.Compression
	rawSize, rawSum := int64(len(raw)), sha256.Sum256(raw)
	stored := raw
	if codec != None {
		stored = d.w.pool.compress(raw)
		d.w.pool.recycle(raw, true)
		raw = nil // only the compressed bytes wait for the previous chunk
	}
	defer d.w.pool.recycle(stored, codec == None)
	if prev != nil {
		<-prev
	}
	if d.jobError() != nil {
		return // the stream or spool failed already
	}
	if err := d.emit(chunkName(d.dir, n, codec), stored, rawSize, rawSum, codec == None); err != nil {
		d.jobMu.Lock()
		if d.jobErr == nil {
			d.jobErr = err
		}
		d.jobMu.Unlock()
		return
	}
	d.chunks.Add(1)
	d.docBytes.Add(rawSize)
}

// jobError returns the first error of a chunk written by the pool.
func (d *DBWriter) jobError() error {
	d.jobMu.Lock()
	defer d.jobMu.Unlock()
	return d.jobErr
}
