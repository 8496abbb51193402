package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sofadb/sofa/replicate"
)

// DBWriter writes one database's group of members. It implements
// replicate.Target for the replication engine: RevsDiff reports every
// revision missing, WriteDocs stores revisions with their attachment
// bytes, PutLocal records the checkpoint (its source_last_seq becomes the
// seq reached). Safe for concurrent use, except that Close and Abort must
// not overlap other calls.
type DBWriter struct {
	w      *Writer
	name   string
	dir    string
	direct bool // writes straight into the archive's tar stream

	spoolMu sync.Mutex
	spool   *os.File
	stw     *tar.Writer

	mu          sync.Mutex
	err         error
	started     bool
	closed      bool
	info        replicate.DBInfo
	meta        replicate.Metadata
	startMeta   []byte // metadata as meta.json holds it (JSON)
	buf         []byte
	nchunk      int
	tail        chan struct{} // closed once the last chunk handed to the pool is written
	blobs       map[[32]byte]*blobWait
	prev        *DBState // this database in the archive Since names
	locals      map[string][]byte
	checkpoints map[string]json.RawMessage
	seq         replicate.Seq
	summary     DBSummary

	// counted outside mu, by emitters
	storedBytes, nblobs, blobBytes, chunks, docBytes atomic.Int64

	// the first error of a chunk written by the pool; a chunk job never
	// takes mu, which WriteDocs holds while it waits for a pool slot.
	jobMu  sync.Mutex
	jobErr error
}

// blobWait lets writers referencing a blob another goroutine is still
// writing wait for it, so a blob always precedes its first reference.
type blobWait struct {
	done chan struct{}
	err  error
}

var doneBlob = func() *blobWait { b := &blobWait{done: make(chan struct{})}; close(b.done); return b }()

var _ replicate.Target = (*DBWriter)(nil)

func newDBWriter(w *Writer, name, dir string) *DBWriter {
	d := &DBWriter{
		w: w, name: name, dir: dir,
		blobs:       map[[32]byte]*blobWait{},
		locals:      map[string][]byte{},
		checkpoints: map[string]json.RawMessage{},
	}
	d.summary = DBSummary{Name: name, Dir: dir}
	if s := w.opts.Since; s != nil {
		if st, ok := s.Databases[name]; ok {
			d.prev = &st
			d.seq = st.Seq
			for id, body := range st.Checkpoints {
				d.locals[id] = bytes.Clone(body)
			}
		}
	}
	return d
}

// Name returns the database name.
func (d *DBWriter) Name() string { return d.name }

// SetSourceInfo records the source database's state (doc counts,
// update_seq, instance_start_time) in the group's meta member. Call it
// before the first WriteDocs or SetMetadata; later calls are ignored.
func (d *DBWriter) SetSourceInfo(info replicate.DBInfo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started {
		return
	}
	d.info = info
	if d.prev != nil && recreated(*d.prev, info) {
		// Back the new database up from scratch: forget the previous
		// archive's seq and checkpoints, so the engine and the group's
		// meta member agree that this is a full backup of it.
		d.prev, d.seq = nil, nil
		clear(d.locals)
	}
}

// SetStartSeq is told by the replication engine the seq it starts from
// once it has judged the checkpoints (replicate.StartSeqSetter). An
// engine that starts from the beginning (it found the source database
// recreated, say) makes this a full backup of the database: the previous
// archive's seq and checkpoints are forgotten, so the group's meta member
// agrees with what the group holds. Ignored once the group has started.
func (d *DBWriter) SetStartSeq(since replicate.Seq) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started || len(since) > 0 || d.prev == nil {
		return
	}
	d.prev, d.seq = nil, nil
	clear(d.locals)
}

var _ replicate.StartSeqSetter = (*DBWriter)(nil)

// recreated reports whether the source database now described by info is
// not the one prev recorded: its instance_start_time changed, or (integer
// seqs only: PouchDB, CouchDB 1.x) its update_seq is behind the seq prev
// reached. Opaque clustered seqs are never compared; CouchDB 2+ restarts a
// changes feed whose since names shards of a deleted database.
func recreated(prev DBState, info replicate.DBInfo) bool {
	a, b := prev.InstanceStart, info.InstanceStart
	if a != "" && a != "0" && b != "" && b != "0" && a != b {
		return true
	}
	p, err1 := strconv.ParseInt(string(prev.Seq), 10, 64)
	n, err2 := strconv.ParseInt(string(info.UpdateSeq), 10, 64)
	return err1 == nil && err2 == nil && p > n
}

// Since returns the seq an incremental backup of this database starts
// from: the seq recorded for it in the previous archive. It is nil (back
// up from scratch) for a full archive, a database the previous archive
// lacks, or one recreated since (its instance_start_time differs from the
// one recorded there, or its integer update_seq is behind the seq
// recorded). Call after SetSourceInfo.
func (d *DBWriter) Since() replicate.Seq {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sinceLocked()
}

func (d *DBWriter) sinceLocked() replicate.Seq {
	if d.prev == nil || recreated(*d.prev, d.info) {
		return nil
	}
	return d.prev.Seq
}

// Info describes the archive side: Name is the database name and Identity
// "sofa-archive/<name>", stable across archives so checkpoints carry over
// between incremental backups. Counts are zero.
func (d *DBWriter) Info(ctx context.Context) (replicate.DBInfo, error) {
	return replicate.DBInfo{Name: d.name, Identity: "sofa-archive/" + d.name, InstanceStart: "0"}, nil
}

// GetLocal returns a checkpoint written with PutLocal in this archive, or
// the one the previous archive of the chain recorded; ErrNotFound else.
// A "_local/" prefix on id is ignored.
func (d *DBWriter) GetLocal(ctx context.Context, id string) ([]byte, error) {
	id = strings.TrimPrefix(id, "_local/")
	d.mu.Lock()
	defer d.mu.Unlock()
	if b, ok := d.locals[id]; ok {
		return bytes.Clone(b), nil
	}
	return nil, replicate.ErrNotFound
}

// PutLocal records a checkpoint document. Its source_last_seq (CouchDB) or
// last_seq (PouchDB) becomes the seq reached, stored in the group's end
// member. The body must be a JSON object.
func (d *DBWriter) PutLocal(ctx context.Context, id string, body []byte) error {
	id = strings.TrimPrefix(id, "_local/")
	var cp struct {
		SourceLastSeq json.RawMessage `json:"source_last_seq"`
		LastSeq       json.RawMessage `json:"last_seq"`
	}
	if err := json.Unmarshal(body, &cp); err != nil {
		return fmt.Errorf("archive: checkpoint %q: %w", id, err)
	}
	seq := cp.SourceLastSeq
	if len(seq) == 0 || string(seq) == "null" {
		seq = cp.LastSeq
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return &Error{Err: ErrClosed}
	}
	compact := new(bytes.Buffer)
	if err := json.Compact(compact, body); err != nil {
		return fmt.Errorf("archive: checkpoint %q: %w", id, err)
	}
	d.locals[id] = compact.Bytes()
	d.checkpoints[id] = json.RawMessage(compact.Bytes())
	if s := seqOf(seq); s != nil {
		d.seq = s
	}
	return nil
}

// RevsDiff reports every requested revision as missing: an archive holds
// nothing yet.
func (d *DBWriter) RevsDiff(ctx context.Context, revs map[string][]string) (map[string]replicate.Missing, error) {
	out := make(map[string]replicate.Missing, len(revs))
	for id, rs := range revs {
		if len(rs) > 0 {
			out[id] = replicate.Missing{Missing: append([]string(nil), rs...)}
		}
	}
	return out, nil
}

// SetMetadata records `_security`, `_revs_limit` and properties. The
// BeforeDocs call goes into the meta member; the AfterDocs one into the
// end member.
func (d *DBWriter) SetMetadata(ctx context.Context, m replicate.Metadata, phase replicate.MetadataPhase) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return &Error{Err: ErrClosed}
	}
	d.meta = m
	if phase == replicate.BeforeDocs {
		return d.startLocked()
	}
	return nil
}

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
	if err != nil {
		return nil, err
	}
	var rejected []replicate.DocError
	for _, doc := range docs {
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
		d.buf = appendRecord(d.buf, doc, body, sums, form)
		d.summary.Revisions++
		d.summary.Attachments += int64(len(doc.Atts))
		if doc.Deleted {
			d.summary.Tombstones++
		}
		if len(d.buf) >= d.w.chunk {
			if err := d.queueChunkLocked(ctx); err != nil {
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

// ensureBlob writes a's bytes as blob member sum unless this group or the
// archive already holds them; it returns once the blob is in the stream
// (or spool), so a record referencing it may follow.
func (d *DBWriter) ensureBlob(sum [32]byte, a *replicate.Attachment) error {
	d.mu.Lock()
	if b, ok := d.blobs[sum]; ok {
		d.mu.Unlock()
		<-b.done
		return b.err
	}
	b := &blobWait{done: make(chan struct{})}
	d.blobs[sum] = b
	d.mu.Unlock()

	if d.w.isCommitted(sum) {
		b.err = nil
	} else {
		codec := d.w.opts.Compression
		var stored []byte
		if codec != None && a.Encoding == "" {
			stored = compress(codec, nil, a.Data)
		}
		if codec == None || a.Encoding != "" || len(stored) >= len(a.Data) {
			codec, stored = None, a.Data // already compressed, or incompressible
		}
		b.err = d.emit(blobName(sum, codec), stored, int64(len(a.Data)), sum, codec == None)
		if b.err == nil {
			d.nblobs.Add(1)
			d.blobBytes.Add(int64(len(a.Data)))
		}
	}
	close(b.done)
	d.mu.Lock()
	if b.err == nil {
		d.blobs[sum] = doneBlob // drop the channel, keep the key
	}
	d.mu.Unlock()
	return b.err
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

// startLocked writes the meta member once (d.mu held).
func (d *DBWriter) startLocked() error {
	if d.err != nil {
		return d.err
	}
	if d.started {
		return nil
	}
	d.started = true
	d.summary.DocCount, d.summary.DelCount = d.info.DocCount, d.info.DelCount
	d.summary.InstanceStart = d.info.InstanceStart
	d.summary.Since = d.sinceLocked()
	m := dbMeta{
		Name: d.name, DocCount: d.info.DocCount, DelCount: d.info.DelCount, DelCountUnknown: d.info.DelCountUnknown,
		UpdateSeq: rawSeq(d.info.UpdateSeq), InstanceStart: d.info.InstanceStart,
		Since: rawSeq(d.summary.Since), Metadata: metaToJSON(d.meta),
	}
	raw, err := json.Marshal(m)
	if err != nil {
		d.err = err
		return err
	}
	d.startMeta, _ = json.Marshal(m.Metadata)
	raw = append(raw, '\n')
	if !d.direct {
		f, err := os.CreateTemp(d.w.opts.TempDir, "sofa-spool-*.tar")
		if err != nil {
			d.err = fmt.Errorf("archive: spool for %q: %w", d.name, err)
			return d.err
		}
		_ = os.Remove(f.Name()) // unlinked at once where the OS allows: no leftovers
		d.spool, d.stw = f, tar.NewWriter(f)
	}
	if err := d.emit(metaName(d.dir), raw, int64(len(raw)), sha256.Sum256(raw), true); err != nil {
		d.err = err
		return err
	}
	return nil
}

// emit writes one member of this group, to the archive or to the spool.
// plain says stored is the uncompressed content itself.
func (d *DBWriter) emit(name string, stored []byte, rawSize int64, rawSum [32]byte, plain bool) error {
	sum := rawSum // stored bytes are the raw bytes: hash once
	if !plain {
		sum = sha256.Sum256(stored)
	}
	if d.direct {
		d.w.mu.Lock()
		err := d.w.writeMemberLocked(name, stored, rawSize, rawSum, sum)
		d.w.mu.Unlock()
		if err == nil {
			d.storedBytes.Add(int64(len(stored)))
		}
		return err
	}
	d.spoolMu.Lock()
	defer d.spoolMu.Unlock()
	if err := d.stw.WriteHeader(d.w.tarHeader(name, int64(len(stored)), rawSize, sum, rawSum)); err != nil {
		return fmt.Errorf("archive: spool for %q: %w", d.name, err)
	}
	if _, err := d.stw.Write(stored); err != nil {
		return fmt.Errorf("archive: spool for %q: %w", d.name, err)
	}
	d.storedBytes.Add(int64(len(stored)))
	return nil
}

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
	err := d.startLocked()
	if err == nil && len(d.buf) > 0 {
		err = d.queueChunkLocked(context.Background())
	}
	d.w.pool.recycle(d.buf, true)
	d.buf = nil
	tail := d.tail
	d.mu.Unlock()
	if tail != nil {
		<-tail // every chunk handed to the pool is written
	}
	if err == nil {
		err = d.jobError()
	}
	d.mu.Lock()
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
	d.summary.Metadata = d.meta
	d.summary.Error = reason
	d.summary.Blobs, d.summary.BlobBytes = d.nblobs.Load(), d.blobBytes.Load()
	d.summary.Chunks, d.summary.DocBytes = int(d.chunks.Load()), d.docBytes.Load()
	d.summary.StoredBytes = d.storedBytes.Load()
	sum := d.summary
	d.mu.Unlock()
	if err == nil {
		raw, jerr := d.endJSON(sum)
		if jerr != nil {
			err = jerr
		} else {
			err = d.emit(endName(d.dir), raw, int64(len(raw)), sha256.Sum256(raw), true)
		}
	}
	if err == nil && !d.direct {
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
	if ferr := d.w.finishDB(d, sum); err == nil {
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
