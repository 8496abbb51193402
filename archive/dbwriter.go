package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sofadb/sofa/replicate"
)

// DBWriter writes one database's group of members. It implements
// replicate.Target for the replication engine: RevsDiff reports every
// revision missing, WriteDocs stores revisions with their attachment
// bytes, PutLocal records the checkpoint (its source_last_seq becomes the
// seq reached). Safe for concurrent use, except that Close and Abort must
// not overlap other calls.
type DBWriter struct {
	w    *Writer
	name string
	dir  string

	// spoolMu guards where the group's members go: straight into the
	// archive's tar stream (direct: it owns the stream), or into its
	// spool, a temporary tar file created at the first member, copied
	// into the stream when it is the stream's turn (see Writer). direct
	// only ever turns true: when the database is opened as the owner, or
	// promoted to owner while open (its spool copied first). closing:
	// finish began, the database is not promoted any more.
	spoolMu sync.Mutex
	direct  bool
	closing bool
	spool   *os.File
	stw     *tar.Writer
	spooled atomic.Int64 // bytes in the spool not yet in the stream
	// while the database waits in the writer's queue (w.mu): held, it
	// keeps spool open (one of maxHeldSpools); parked, its group was
	// moved into the writer's parking file and spool closed
	held   bool
	parked *io.SectionReader

	mu        sync.Mutex
	err       error
	started   bool
	closed    bool
	info      replicate.DBInfo
	meta      replicate.Metadata
	startMeta []byte // metadata as meta.json holds it (JSON)
	buf       []byte
	nchunk    int
	tail      chan struct{} // closed once the last chunk handed to the pool is written
	blobs     map[[32]byte]*blobWait
	revs      map[revKey]struct{} // revisions stored, while the budget lasts (replays.go)
	prev      *DBState            // this database in the archive Since names
	// inFull says why an incremental backs this database up in full
	// (SetSourceInfo found it recreated), "" when it does not.
	inFull      string
	locals      map[string][]byte
	checkpoints map[string]json.RawMessage
	seq         replicate.Seq
	summary     DBSummary
	endState    *DBState // SetEndState's, which wins over seq and checkpoints

	// counted outside mu, by emitters
	storedBytes, nblobs, blobBytes, chunks, docBytes atomic.Int64

	// format version 3 (dbwriter_pack.go): the members collected for
	// the next pack, the packs cut so far, and firstOut, closed once the
	// first pack (holding meta.json) is written
	pk       packBuf
	npack    int
	firstOut chan struct{}

	// the first error of a chunk written by the pool; a chunk job never
	// takes mu, which WriteDocs holds while it waits for a pool slot.
	jobMu  sync.Mutex
	jobErr error
}

var _ replicate.Target = (*DBWriter)(nil)

func newDBWriter(w *Writer, name, dir string) *DBWriter {
	d := &DBWriter{
		w: w, name: name, dir: dir,
		blobs:       map[[32]byte]*blobWait{},
		locals:      map[string][]byte{},
		checkpoints: map[string]json.RawMessage{},
	}
	d.summary = DBSummary{Name: name, Dir: dir}
	if d.packs() {
		d.firstOut = make(chan struct{})
	}
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
		d.inFull = "its instance_start_time changed since the previous archive (recreated)"
		if d.prev.InstanceStart == info.InstanceStart {
			d.inFull = "its update_seq is behind the seq the previous archive reached (recreated)"
		}
		d.prev, d.seq = nil, nil
		clear(d.locals)
	}
}

// InFull says why an incremental backup backs the database up in full
// because SetSourceInfo found it recreated, "" when it does not (the
// engine says itself when it reads a database from the beginning).
func (d *DBWriter) InFull() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inFull
}

// Stored returns the leaf revisions written so far, tombstones included
// (replicate.StoredCounter); whole is false for an incremental backup of
// the database (only its changes since the previous archive).
func (d *DBWriter) Stored() (leaves int64, whole bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	since := d.summary.Since // as the group's meta member records it
	if !d.started {
		since = d.sinceLocked()
	}
	return d.summary.Revisions, len(since) == 0
}

var _ replicate.StoredCounter = (*DBWriter)(nil)

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

// SetEndState makes the group end where the group of the same database
// in another archive ended (a copy of that archive, or a chain of
// archives consolidated into this one): s.Seq becomes the seq reached
// and s.Checkpoints the group's checkpoints, whatever PutLocal recorded
// meanwhile. The engine's checkpoints of a copy from an archive name the
// archive read, not the server backed up; with s, an incremental backup
// of that server continues this archive as it would the other. It does
// not change the group's instance_start_time (SetSourceInfo's). Call it
// before Close or Abort; a later call wins.
func (d *DBWriter) SetEndState(s DBState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.endState = &s
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
	if err := json.Compact(compact, newestHistory(body)); err != nil {
		return fmt.Errorf("archive: checkpoint %q: %w", id, err)
	}
	d.locals[id] = compact.Bytes()
	d.checkpoints[id] = json.RawMessage(compact.Bytes())
	if s := seqOf(seq); s != nil {
		d.seq = s
	}
	return nil
}

// RevsDiff reports the requested revisions this group has not stored
// yet: all of them but those the source sent before (see replays.go),
// answered from memory. LocalRevsDiff (replicate.LocalDiffer) tells the
// engine so, and it asks for every batch.
func (d *DBWriter) RevsDiff(ctx context.Context, revs map[string][]string) (map[string]replicate.Missing, error) {
	out := make(map[string]replicate.Missing, len(revs))
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, rs := range revs {
		var missing []string
		for _, rev := range rs {
			if !d.storedLocked(d.w.revKey(id, rev)) {
				missing = append(missing, rev)
			}
		}
		if len(missing) > 0 {
			out[id] = replicate.Missing{Missing: missing}
		}
	}
	return out, nil
}

// LocalRevsDiff marks RevsDiff as answered without a request
// (replicate.LocalDiffer).
func (d *DBWriter) LocalRevsDiff() {}

var _ replicate.LocalDiffer = (*DBWriter)(nil)

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

// startLocked writes the meta member once (d.mu held).
func (d *DBWriter) startLocked() error {
	if d.err != nil {
		return d.err
	}
	if d.started {
		return nil
	}
	d.started = true
	d.summary.DocCount, d.summary.DelCount, d.summary.DelCountUnknown = d.info.DocCount, d.info.DelCount, d.info.DelCountUnknown
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
	if d.packs() {
		d.pk.add(metaName(d.dir), raw, false)
		return nil
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
	d.spoolMu.Lock()
	if !d.direct {
		err := d.spoolLocked(name, stored, rawSize, rawSum, sum)
		d.spoolMu.Unlock()
		return err
	}
	d.spoolMu.Unlock()
	// direct stays true: the stream's lock orders this member after the
	// spool a promotion copied
	d.w.mu.Lock()
	err := d.w.writeMemberLocked(name, stored, rawSize, rawSum, sum)
	d.w.mu.Unlock()
	if err == nil {
		d.storedBytes.Add(int64(len(stored)))
	}
	return err
}

// spoolLocked appends one member to the spool (d.spoolMu held), created
// at the first.
func (d *DBWriter) spoolLocked(name string, stored []byte, rawSize int64, rawSum, sum [32]byte) error {
	if d.stw == nil {
		f, err := os.CreateTemp(d.w.opts.TempDir, "sofa-spool-*.tar")
		if err != nil {
			return fmt.Errorf("archive: spool for %q: %w", d.name, err)
		}
		_ = os.Remove(f.Name()) // unlinked at once where the OS allows: no leftovers
		d.spool, d.stw = f, tar.NewWriter(f)
	}
	if err := d.stw.WriteHeader(d.w.tarHeader(name, int64(len(stored)), rawSize, sum, rawSum)); err != nil {
		return fmt.Errorf("archive: spool for %q: %w", d.name, err)
	}
	if _, err := d.stw.Write(stored); err != nil {
		return fmt.Errorf("archive: spool for %q: %w", d.name, err)
	}
	d.storedBytes.Add(int64(len(stored)))
	n := int64(len(stored)) + 512 // with its header, about
	d.spooled.Add(n)
	d.w.spooled.Add(n)
	return nil
}

// Pace (replicate.Pacer) holds a database's next read while another
// database owns the archive's stream and the spools hold
// Options.SpoolAhead bytes or more (never with SpoolAhead 0, and never
// the owner's). Before it waits it calls release (the engine writes what
// it holds); it returns once the stream is this database's, the spools
// were copied below the limit, no database owns the stream, or the
// archive failed; ctx.Err() if ctx is done first.
func (d *DBWriter) Pace(ctx context.Context, release func() error) error {
	w := d.w
	if w.opts.SpoolAhead <= 0 {
		return nil
	}
	released := false
	for {
		turn := w.turnChan()
		o := w.ownerNow.Load()
		if o == nil || o == d || w.spooled.Load() < w.opts.SpoolAhead || w.broken.Load() {
			return nil
		}
		if !released {
			released = true
			if err := release(); err != nil {
				return err
			}
			continue // look again: the write may have changed the turn
		}
		w.pacing.Add(1)
		select {
		case <-turn:
			w.pacing.Add(-1)
		case <-ctx.Done():
			w.pacing.Add(-1)
			return ctx.Err()
		}
	}
}

var _ replicate.Pacer = (*DBWriter)(nil)
