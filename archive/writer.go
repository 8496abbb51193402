package archive

import (
	"archive/tar"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"io"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultChunkSize is the uncompressed size at which a database's pending
// records are cut into a doc chunk member. A revision larger than this
// makes one chunk of its own.
const DefaultChunkSize = 2 << 20

// Options configure a Writer. The zero value writes a full backup with
// zstd, 2 MiB chunks and temporary files in os.TempDir().
type Options struct {
	// Compression of doc chunks and blobs; "" means Zstd.
	Compression Compression
	// ChunkSize is the uncompressed bytes per doc chunk; 0 means
	// DefaultChunkSize.
	ChunkSize int
	// TempDir holds spool files of databases written while another one
	// owns the stream, and a spilled manifest; "" means os.TempDir().
	TempDir string
	// Tool is recorded in the header ("sofa v1.2.3").
	Tool string
	// Source is recorded in the header: see Header.Source.
	Source string
	// Since makes the archive an incremental one continuing the archive
	// it describes (see ReadSince); nil means a full backup.
	Since *Since
	// Shard marks the archive as one member of a sharded backup (see
	// Header.Shard); nil: not sharded.
	Shard *Shard
	// Now returns the creation time; nil means time.Now.
	Now func() time.Time
	// SpoolAhead bounds what databases read while another one owns the
	// stream: once the spools hold this many bytes not yet in the stream,
	// their next batches wait (DBWriter.Pace) until the stream is theirs
	// or the spools were copied below it. For a slow stream (an object
	// store's upload) that keeps the owner reading at the source's full
	// rate, so the stream is fed while the source is read, not after;
	// 0: no bound (a local file takes a spool as fast as it is copied).
	SpoolAhead int64
	// Version is the format version written: 0 means FormatVersion (3);
	// 2 writes every member on its own, with its checksum records, for
	// readers older than version 3 (sofa before pack members).
	Version int
	// ChunkWorkers is the number of doc chunks of the whole archive
	// compressed at once, off the callers of WriteDocs; it bounds the
	// chunks held in memory (each up to ChunkSize plus one revision, with
	// its compressed form and, for zstd, a 38 MiB encoder). 0 means half
	// of GOMAXPROCS, at least 1; at most MaxChunkWorkers.
	ChunkWorkers int
}

// Writer writes one archive as a tar stream to an io.Writer, sequentially
// and without seeking, so the sink may be a pipe or stdout.
//
// Databases are written through per-database handles (Database), which
// implement replicate.Target and may be used from many goroutines at once.
// Every database's members are contiguous in the stream: the first handle
// opened while no other one owns the stream writes straight through; the
// others spool their members to a temporary file. When the owner closes,
// the spools of databases closed meanwhile are appended, then the open
// database with the largest spool becomes the owner (its spool appended,
// its next members written straight through); a database closed while
// another owns the stream waits in line. Close writes the manifest and
// the tar trailer; it does not close the underlying io.Writer.
//
// Errors are sticky: once a write to the underlying writer fails, every
// later call returns that error.
type Writer struct {
	opts  Options
	hdr   Header
	chunk int
	pool  *chunkPool

	mu      sync.Mutex
	tw      *tar.Writer
	cw      *countWriter // under tw: the offset of what tw wrote
	ix      *indexer
	err     error
	closed  bool
	owner   *DBWriter   // database writing straight into tw
	queue   []*DBWriter // closed spooled databases waiting for the stream
	held    int         // of queue, those keeping their own spool file open
	parking parking     // groups of the rest of queue
	// replays.go: seeds of revKey, keys left to the open groups
	keySeeds   [2]maphash.Seed
	replayKeys atomic.Int64
	names      map[string]bool
	dirs       map[string]string
	open       map[*DBWriter]bool
	committed  map[[32]byte]struct{} // blobs already in tw
	// packs are the members of each pack member not yet in tw (format
	// version 3), by the pack's name: its index and manifest entries
	// name them
	packs     map[string]packInfo
	members   spillBuffer // manifest member entries, comma-separated JSON
	summaries []DBSummary
	totals    Totals

	// for DBWriter.Pace, read without mu: the owner, the bytes spooled
	// and not yet in the stream, whether the stream failed; turn is
	// closed (and replaced) whenever one of them changes for the better
	ownerNow atomic.Pointer[DBWriter]
	spooled  atomic.Int64
	broken   atomic.Bool
	pacing   atomic.Int32 // databases waiting in Pace
	turnMu   sync.Mutex
	turn     chan struct{}
}

// NewWriter starts an archive on w and writes its header member. It fails
// only if the options are invalid or the header cannot be written.
func NewWriter(w io.Writer, opts Options) (*Writer, error) {
	c, err := ParseCompression(string(opts.Compression))
	if err != nil {
		return nil, err
	}
	opts.Compression = c
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	switch opts.Version {
	case 0:
		opts.Version = FormatVersion
	case 2, FormatVersion:
	default:
		return nil, fmt.Errorf("archive: cannot write format version %d (writes 2 and %d)", opts.Version, FormatVersion)
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("archive: archive id: %w", err)
	}
	aw := &Writer{
		opts:  opts,
		chunk: opts.ChunkSize,
		pool:  newChunkPool(c, opts.ChunkSize, opts.ChunkWorkers),
		hdr: Header{
			Format: FormatName, Version: opts.Version, Tool: opts.Tool,
			Created: now().UTC().Truncate(time.Second), Compression: c,
			ID: hex.EncodeToString(id[:]), Since: opts.Since.withNewestHistory(), Source: opts.Source, Shard: opts.Shard,
		},
		cw:        &countWriter{w: w},
		names:     map[string]bool{},
		dirs:      map[string]string{},
		open:      map[*DBWriter]bool{},
		committed: map[[32]byte]struct{}{},
		packs:     map[string]packInfo{},
		members:   spillBuffer{dir: opts.TempDir, limit: 1 << 20},
		parking:   parking{dir: opts.TempDir},
	}
	aw.tw = tar.NewWriter(aw.cw)
	aw.keySeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}
	aw.replayKeys.Store(maxReplayKeys)
	aw.ix = newIndexer(aw.hdr)
	raw, err := json.MarshalIndent(aw.hdr, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("archive: header: %w", err)
	}
	raw = append(raw, '\n')
	sum := sha256.Sum256(raw)
	aw.mu.Lock()
	defer aw.mu.Unlock()
	if err := aw.writeMemberLocked(headerName, raw, int64(len(raw)), sum, sum); err != nil {
		return nil, err
	}
	return aw, nil
}

// Header returns the archive's header (its ID names it in a chain).
func (w *Writer) Header() Header { return w.hdr }

// Database starts the group of one database and returns its handle. Each
// name may be opened once per archive. The handle must be closed (Close or
// Abort) before the Writer is.
func (w *Writer) Database(name string) (*DBWriter, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return nil, w.err
	}
	if w.closed {
		return nil, &Error{Err: ErrClosed}
	}
	if w.names[name] {
		return nil, fmt.Errorf("archive: database %q already in this archive", name)
	}
	dir := dbDir(name)
	if other, ok := w.dirs[dir]; ok {
		return nil, fmt.Errorf("archive: databases %q and %q map to the same member directory", other, name)
	}
	d := newDBWriter(w, name, dir)
	if w.owner == nil {
		d.direct = true // not shared yet
		w.setOwnerLocked(d)
	}
	w.names[name] = true
	w.dirs[dir] = name
	w.open[d] = true
	return d, nil
}

// Close finishes the archive: it writes the manifest member and the tar
// trailer. It fails if a database handle is still open. It does not close
// the underlying writer. Calling Close again returns the first result.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.err
	}
	w.closed = true
	defer w.members.close()
	defer w.pool.close()
	defer w.parking.close()
	if w.err != nil {
		return w.err
	}
	if len(w.open) > 0 {
		var names []string
		for d := range w.open {
			names = append(names, strconv.Quote(d.name))
		}
		sort.Strings(names)
		w.err = fmt.Errorf("archive: close: databases still open: %v", names)
		return w.err
	}
	if err := w.writeManifestLocked(); err != nil {
		return w.fail(err)
	}
	if err := w.writeIndexLocked(); err != nil {
		return w.fail(err)
	}
	if err := w.tw.Close(); err != nil {
		return w.fail(fmt.Errorf("archive: close: %w", err))
	}
	return nil
}

// brokenErr is the stream's sticky error once it failed, else nil.
func (w *Writer) brokenErr() error {
	if !w.broken.Load() {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// fail records err as the sticky error (w.mu held) and returns it.
func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
		w.broken.Store(true)
		w.wake()
	}
	return w.err
}

// tarHeader builds the header of a regular-file member with our PAX
// records.
func (w *Writer) tarHeader(name string, size, rawSize int64, sum, rawSum [32]byte) *tar.Header {
	return &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Mode:     0o644,
		Size:     size,
		ModTime:  w.hdr.Created,
		Format:   tar.FormatPAX,
		PAXRecords: map[string]string{
			paxSHA256:    hex.EncodeToString(sum[:]),
			paxRawSHA256: hex.EncodeToString(rawSum[:]),
			paxRawSize:   strconv.FormatInt(rawSize, 10),
		},
	}
}

// streamHeader is h as the archive's stream has it: in format version 3,
// a member whose bytes check themselves carries no SOFA records (see
// selfChecking); spools keep them, to check their copy.
func (w *Writer) streamHeader(h *tar.Header) *tar.Header {
	p, err := parseName(h.Name)
	if err != nil || !selfChecking(w.hdr.Version, p) {
		return h
	}
	c := *h
	c.PAXRecords, c.Format = nil, tar.FormatUnknown // USTAR, or PAX for a long name only
	return &c
}

// selfChecking says whether a member of an archive of format version v
// goes without the SOFA records: in version 3, a zstd pack or blob (its
// frame declares its size and carries a checksum of its content; a blob's
// name is the SHA-256 of its content) and a blob stored as is (its name is
// the SHA-256 of its bytes).
func selfChecking(v int, p parsedName) bool {
	if v < 3 {
		return false
	}
	switch p.kind {
	case kindPack:
		return p.codec == Zstd
	case kindBlob:
		return p.codec == Zstd || p.codec == None
	}
	return false
}

// writeMemberLocked appends one member to the tar stream and to the
// manifest's member list. w.mu must be held.
func (w *Writer) writeMemberLocked(name string, stored []byte, rawSize int64, rawSum, sum [32]byte) error {
	if w.err != nil {
		return w.err
	}
	start, err := w.offsetLocked()
	if err != nil {
		return w.fail(fmt.Errorf("archive: write %q: %w", name, err))
	}
	if err := w.tw.WriteHeader(w.streamHeader(w.tarHeader(name, int64(len(stored)), rawSize, sum, rawSum))); err != nil {
		return w.fail(fmt.Errorf("archive: write %q: %w", name, err))
	}
	if _, err := w.tw.Write(stored); err != nil {
		return w.fail(fmt.Errorf("archive: write %q: %w", name, err))
	}
	if err := w.noteSpanLocked(name, start); err != nil {
		return err
	}
	return w.noteMemberLocked(name, int64(len(stored)), rawSize, sum, rawSum)
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// offsetLocked is the offset of the next member: what tw wrote, with the
