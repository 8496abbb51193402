package archive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
)

// DefaultMaxMemberSize caps any member, as stored and decompressed, when
// ReaderOptions.MaxMemberSize is 0. A member declaring or reaching more is
// refused with ErrTooLarge (decompression bomb defence).
const DefaultMaxMemberSize = 1 << 30

// DefaultBlobMemory is how many attachment bytes a reader keeps in memory
// before spilling blobs to a temporary file, when ReaderOptions.BlobMemory
// is 0.
const DefaultBlobMemory = 64 << 20

// ReaderOptions configure a Reader. The zero value is usable.
type ReaderOptions struct {
	// TempDir receives the blob spill file; "" means os.TempDir().
	TempDir string
	// MaxMemberSize caps each member's stored and uncompressed size in
	// bytes; 0 means DefaultMaxMemberSize. It bounds memory: one member is
	// held at a time, compressed and uncompressed.
	MaxMemberSize int64
	// BlobMemory is the attachment bytes kept in memory before spilling;
	// 0 means DefaultBlobMemory, negative means always spill.
	BlobMemory int64
	// RefetchBlobs (Scan only): a group reader keeps no blob past
	// BlobMemory, spilling none to TempDir, and reads one again at its
	// offset when a later record refers to it. For an io.ReaderAt whose
	// reads are cheap (a local file): a restore then needs no temporary
	// space for attachments.
	RefetchBlobs bool
	// MemberMemory (Scan only) caps the bytes of members, stored and
	// uncompressed, that the readers of one Index hold at once: a reader
	// waits before reading a member that would pass it (a member larger
	// than the cap waits for the others to finish theirs). 0 means
	// DefaultMemberMemory.
	MemberMemory int64
	// ReadSize (Scan only) is the bytes each group reader of an Index
	// asks its io.ReaderAt for at once (one ReadAt: one ranged GET on
	// S3), at most the group's size; the tar reader's many small reads
	// are served from that buffer. 0 means DefaultReadSize.
	ReadSize int64
	// ReadMemory (Scan only) caps the bytes of the group readers' own
	// buffers (one each, of up to ReadSize) that the readers of one Index
	// hold at once; a reader opened when it is spent reads with a buffer
	// of MinReadSize (outside the cap). 0 means DefaultReadMemory (four
	// readers' buffers of DefaultReadSize). The chunks read ahead
	// (ReadAhead) are not counted here: all read buffers of an Index
	// take at most ReadMemory + ReadAhead × ReadSize bytes, plus
	// MinReadSize per reader opened past ReadMemory.
	ReadMemory int64
	// ReadAhead (Scan only) is the ranged reads (ReadAt calls of up to
	// ReadSize bytes) the group readers of one Index keep in flight at
	// once, in all, each reading its group in order ahead of its caller:
	// one group alone can have all of them, several share them. The
	// chunks held ahead (in flight, or read and not yet delivered) are at
	// most ReadAhead buffers of ReadSize bytes for the whole Index, on
	// top of ReadMemory. Set it for an io.ReaderAt whose every call is a
	// round trip (an object store, storage.Sequential: its transfers). 0
	// means no read-ahead: each group reader reads its next buffer with
	// one ReadAt when it needs it, and starts no goroutine.
	ReadAhead int
	// CheckDigests (Verify sets it) checks every attachment reference's
	// md5 digest (CouchDB's "md5-<base64>", of the stored bytes) against
	// its blob, once per blob and digest: a reference pointed at another
	// blob of the same size is found. Off for restores (the MD5 of every
	// attachment byte costs CPU a restore needs; a backup checked each
	// digest when it wrote the archive).
	CheckDigests bool
}

// DefaultMemberMemory is ReaderOptions.MemberMemory when 0.
const DefaultMemberMemory = 64 << 20

// Defaults of ReaderOptions.ReadSize and ReadMemory, and the buffer of a
// group reader opened when ReadMemory is spent.
const (
	DefaultReadSize   = 4 << 20
	DefaultReadMemory = 16 << 20
	MinReadSize       = 64 << 10
)

// Reader reads an archive sequentially from an io.Reader (a file, a pipe,
// stdin). It yields the databases in archive order with Next; each is a
// replicate.Source whose changes feed delivers the revisions with their
// attachment bytes. Every member is checked against its SHA-256 before any
// of its content is used, so nothing from a damaged member is ever
// delivered. Close releases temporary files.
type Reader struct {
	tr  *tar.Reader
	src io.Reader // under tr, read past the trailer (checkTail); nil: a section
	// at says where a section reader starts, for errors before its
	// first member ("" for a whole archive).
	at    string
	opts  ReaderOptions
	hdr   Header
	dec   decoders
	blobs *blobStore
	cur   *DBReader
	err   error // sticky
	eof   bool
	// atManifest: the manifest member was reached (every group before
	// it was read), whether or not it and what follows check out.
	atManifest bool
	// partial: the stream holds only some groups (NewIndexedReader); it
	// ends without a manifest.
	partial bool

	last    string    // name of the last member read, for errors
	members int64     // members read before the manifest
	seen    hash.Hash // rolling hash of the member entries read
	// totals of the members read before the manifest, as the
	// manifest's Totals count them
	blobMembers, storedBytes, rawBytes int64
	dirs                               map[string]bool
	summaries                          map[string]DBSummary // by dir, from end members
	revisions                          int64
	// fetch, when set, reads a blob no member read so far holds (an
	// indexed group's reader: the blob is in an earlier group); nil
	// bytes: the archive holds none.
	fetch func(sum [32]byte) ([]byte, error)
	// pending are the members of the pack read last not yet returned
	// (format version 3), and groupStored the stored bytes of each
	// group's members read (packs and blobs), by dir
	pending     []*member
	groupStored map[string]int64
	// gate, when set, is shared by the readers of an Index: held are the
	// bytes this reader holds of it (its current member).
	gate *memGate
	held int64
	// pos counts the bytes the tar reader took (nil: not counted); sp,
	// where the members were found, for the index to be checked against
	// (nil: the read does not pass every member through readMember, or
	// does not start at the archive's first byte).
	pos *countReader
	sp  *spans
	// digests are the blob and digest pairs checked (CheckDigests)
	digests map[digestKey]bool
}

// member is one member read and verified.
type member struct {
	name string
	p    parsedName
	raw  []byte // uncompressed content
	sum  string // hex SHA-256 of the stored bytes, from the tar header
	// from the tar header's SOFA records: the uncompressed bytes' hex
	// SHA-256 and length
	rawSum  string
	rawSize int64
}

// NewReader reads and checks the header member. A nil opts means zero
// options. Errors: ErrVersion for another format or version, ErrFormat or
// ErrUnsafeName when the first member is not a valid header.
func NewReader(r io.Reader, opts *ReaderOptions) (*Reader, error) {
	cr := &countReader{r: r}
	rd := &Reader{tr: tar.NewReader(cr), src: r, seen: sha256.New(), dirs: map[string]bool{}, summaries: map[string]DBSummary{},
		pos: cr, sp: newSpans()}
	if opts != nil {
		rd.opts = *opts
	}
	if rd.opts.MaxMemberSize <= 0 {
		rd.opts.MaxMemberSize = DefaultMaxMemberSize
	}
	switch {
	case rd.opts.BlobMemory == 0:
		rd.opts.BlobMemory = DefaultBlobMemory
	case rd.opts.BlobMemory < 0:
		rd.opts.BlobMemory = 0
	}
	rd.blobs = newBlobStore(rd.opts.TempDir, rd.opts.BlobMemory)
	m, err := rd.readMember()
	if err != nil {
		rd.Close()
		if errors.Is(err, io.EOF) {
			return nil, &Error{Err: &detailErr{ErrTruncated, "no complete first member (" + headerName + "): the archive is empty or cut short"}}
		}
		return nil, err
	}
	if m.p.kind != kindHeader {
		rd.Close()
		return nil, memberErr(m.name, ErrFormat, "first member is not "+headerName)
	}
	if err := parseHeader(m.name, m.raw, &rd.hdr); err != nil {
		rd.Close()
		return nil, err
	}
	return rd, nil
}

func parseHeader(name string, raw []byte, h *Header) error {
	var probe struct {
		Format  string `json:"format"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return memberErr(name, ErrFormat, err.Error())
	}
	if probe.Format != FormatName || probe.Version < MinFormatVersion || probe.Version > FormatVersion {
		return memberErr(name, ErrVersion, fmt.Sprintf("format %q version %d (this reader reads %q versions %d to %d)",
			probe.Format, probe.Version, FormatName, MinFormatVersion, FormatVersion))
	}
	if err := json.Unmarshal(raw, h); err != nil {
		return memberErr(name, ErrFormat, err.Error())
	}
	if h.ID == "" {
		return memberErr(name, ErrFormat, "no archive id")
	}
	if c := h.Compression; c != Zstd && c != Gzip && c != None {
		return memberErr(name, ErrFormat, fmt.Sprintf("unknown compression %q", c))
	}
	return nil
}

// Header returns the archive's header.
func (r *Reader) Header() Header { return r.hdr }

// Close releases the blob spill file and decoders. It does not close the
// underlying reader.
func (r *Reader) Close() error {
	if r.gate != nil {
		r.gate.release(r.held)
		r.held = 0
	}
	r.blobs.close()
	r.dec.close()
	if r.err == nil {
		r.err = &Error{Err: ErrClosed}
	}
	return nil
}

// Next returns the next database. Any part of the previous database that
// was not read is read (and checked) first. At the end of the archive it
// checks the manifest and returns io.EOF; any other error is an *Error
// naming the member, and is sticky.
func (r *Reader) Next() (*DBReader, error) {
	if r.eof {
		return nil, io.EOF
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.cur != nil && !r.cur.done {
		if err := r.cur.drain(); err != nil {
			return nil, err
		}
	}
	r.cur = nil
	for {
		m, err := r.readMember()
		if errors.Is(err, io.EOF) && r.partial {
			r.eof = true
			return nil, io.EOF
		}
		if errors.Is(err, io.EOF) {
			return nil, r.fail(&Error{Err: &detailErr{ErrTruncated, fmt.Sprintf("archive ends after member %q without a manifest", r.last)}})
		}
		if err != nil {
			return nil, err
		}
		switch m.p.kind {
		case kindMeta:
			db, err := r.startDB(m)
			if err != nil {
				return nil, r.fail(err)
			}
			r.cur = db
			return db, nil
		case kindBlob:
			if err := r.blobs.put(m.p.sum, m.raw); err != nil {
				return nil, r.fail(err)
			}
		case kindManifest:
			r.atManifest = true
			if err := r.finish(m); err != nil {
				return nil, r.fail(err)
			}
			r.eof = true
			return nil, io.EOF
		default:
			return nil, r.fail(memberErr(m.name, ErrFormat, "member outside its database group"))
		}
	}
}

func (r *Reader) fail(err error) error {
	if r.err == nil {
		r.err = err
	}
	return err
}

// readMember reads the next tar member, checks its name, type, sizes and
// both checksums, and decompresses it. The manifest is returned with raw
// nil: finish streams it. io.EOF means the tar stream ended.
func (r *Reader) readMember() (*member, error) {
	if r.err != nil {
		return nil, r.err
	}
	if len(r.pending) > 0 {
		m := r.pending[0]
		r.pending = r.pending[1:]
		return m, nil
	}
	var start int64
	if r.pos != nil {
		start = align512(r.pos.n) // the member before was read whole
	}
	h, err := r.tr.Next()
	if errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	if err != nil {
		return nil, r.fail(r.tarErr(err))
	}
	m, err := r.checkHeader(h)
	var data int64
	if err == nil && r.sp != nil {
		data = r.pos.n
		r.sp.member(m.p, start, data, h.Size)
	}
	if err != nil || m.p.kind == kindManifest {
		return m, err
	}
	if r.gate != nil {
		// the member before this one is done with (decoded, delivered)
		r.gate.release(r.held)
		r.held = r.gate.acquire(h.Size + max(m.rawSize, 0))
	}
	if m, err = r.readBody(m, h); err != nil || m.p.kind != kindPack {
		return m, err
	}
	return r.unpack(m, start, data, h.Size)
}

// checkHeader checks a tar header (name, type, the SOFA records, sizes)
// and returns its member, content not read yet.
func (r *Reader) checkHeader(h *tar.Header) (*member, error) {
	p, err := parseName(h.Name)
	if err != nil {
		return nil, r.fail(err)
	}
	name := h.Name
	r.last = name
	if h.Typeflag != tar.TypeReg {
		return nil, r.fail(memberErr(name, ErrFormat, fmt.Sprintf("tar entry type %q is not a regular file", h.Typeflag)))
	}
	sumHex := h.PAXRecords[paxSHA256]
	rawSumHex := h.PAXRecords[paxRawSHA256]
	rawSize, err := strconv.ParseInt(h.PAXRecords[paxRawSize], 10, 64)
	if sumHex == "" && rawSumHex == "" && h.PAXRecords[paxRawSize] == "" && selfChecking(r.hdr.Version, p) {
		// format version 3: its bytes check themselves (readBody)
		if h.Size > r.opts.MaxMemberSize {
			return nil, r.fail(memberErr(name, ErrTooLarge, fmt.Sprintf("declares %d bytes stored; limit %d", h.Size, r.opts.MaxMemberSize)))
		}
		return &member{name: name, p: p, rawSize: -1}, nil
	}
	if len(sumHex) != 64 || len(rawSumHex) != 64 || err != nil || rawSize < 0 {
		return nil, r.fail(memberErr(name, ErrFormat, "tar header lacks the SOFA checksum records"))
	}
	if h.Size > r.opts.MaxMemberSize || rawSize > r.opts.MaxMemberSize {
		return nil, r.fail(memberErr(name, ErrTooLarge, fmt.Sprintf("declares %d bytes stored, %d uncompressed; limit %d", h.Size, rawSize, r.opts.MaxMemberSize)))
	}
	if err := rawRecordsAgree(h, p); err != nil {
		return nil, r.fail(err)
	}
	return &member{name: name, p: p, sum: sumHex, rawSum: rawSumHex, rawSize: rawSize}, nil
}

// rawRecordsAgree checks what a header alone can: an uncompressed
// member's SOFA.raw_sha256 and SOFA.raw_size are its stored SHA-256 and
// size (the manifest and footer are read as streams, never decompressed,
// so nothing else would check them).
func rawRecordsAgree(h *tar.Header, p parsedName) error {
	if p.codec != None {
		return nil
	}
	if h.PAXRecords[paxRawSHA256] != h.PAXRecords[paxSHA256] || h.PAXRecords[paxRawSize] != strconv.FormatInt(h.Size, 10) {
		return memberErr(h.Name, ErrChecksum, "its tar header's uncompressed SHA-256 or size differs from the stored ones, which an uncompressed member's must equal")
	}
	return nil
}

// readBody reads a checked member's content from the tar stream, checks
// both checksums and decompresses it.
func (r *Reader) readBody(m *member, h *tar.Header) (*member, error) {
	name, p, sumHex, rawSumHex, rawSize := m.name, m.p, m.sum, m.rawSum, m.rawSize
	stored, err := readAllLimited(r.tr, h.Size)
	if err != nil {
		return nil, r.fail(r.dataErr(name, err))
	}
	storedSum := sha256.Sum256(stored)
	selfChecked := rawSize < 0
	if selfChecked {
		// no SOFA records (format version 3): what the bytes declare
		if rawSize, err = declaredSize(name, p.codec, stored, r.opts.MaxMemberSize); err != nil {
			return nil, r.fail(damaged(err))
		}
		if rawSize < 0 {
			// a frame that does not say its size: counted up to the limit
			if rawSize, err = zstdSize(name, stored, r.opts.MaxMemberSize); err != nil {
				return nil, r.fail(damaged(err))
			}
		}
		sumHex = hex.EncodeToString(storedSum[:])
		m.sum, m.rawSize = sumHex, rawSize
		if r.gate != nil {
			r.gate.release(r.held)
			r.held = r.gate.acquire(h.Size + rawSize)
		}
	}
	if hex.EncodeToString(storedSum[:]) != sumHex {
		return nil, r.fail(memberErr(name, ErrChecksum, "stored bytes do not match the SHA-256 in its tar header"))
	}
	raw, err := r.dec.decompress(name, p.codec, stored, rawSize)
	if err != nil {
		if selfChecked {
			err = damaged(err)
		}
		return nil, r.fail(err)
	}
	rawSum := storedSum // uncompressed members: the same bytes
	if p.codec != None {
		rawSum = sha256.Sum256(raw)
	}
	if rawSumHex == "" {
		rawSumHex = hex.EncodeToString(rawSum[:]) // format version 3: checked by the codec (or the name)
		m.rawSum = rawSumHex
	}
	if hex.EncodeToString(rawSum[:]) != rawSumHex {
		return nil, r.fail(memberErr(name, ErrChecksum, "uncompressed bytes do not match the SHA-256 in its tar header"))
	}
	if p.kind == kindBlob && rawSum != p.sum {
		return nil, r.fail(memberErr(name, ErrChecksum, "blob bytes do not match the SHA-256 in its name"))
	}
	r.fold(m, int64(len(stored)))
	if p.kind == kindBlob && r.cur != nil && !r.cur.done {
		if r.groupStored == nil {
			r.groupStored = map[string]int64{}
		}
		r.groupStored[r.cur.dir] += int64(len(stored))
	}
	m.raw = raw
	return m, nil
}

// fold adds a member's entry to the rolling hash the manifest is checked
// against.
func (r *Reader) fold(m *member, stored int64) {
	fmt.Fprintf(r.seen, "%s\x00%d\x00%s\x00%d\x00%s\n", m.name, stored, m.sum, m.rawSize, m.rawSum)
	r.members++
	r.storedBytes += stored
	r.rawBytes += m.rawSize
	if m.p.kind == kindBlob {
		r.blobMembers++
	}
}

// readAllLimited reads exactly n bytes. A member's declared size is
// trusted up to trustedSize (one buffer of exactly n, as the declared
// raw size of its decompression is); beyond, the buffer grows as data
// arrives, so that a header claiming more than the stream holds costs
// no more than what arrived.
func readAllLimited(r io.Reader, n int64) ([]byte, error) {
	if n <= trustedSize {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return b, nil
	}
	buf := make([]byte, 0, trustedSize)
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(n, 2*int64(cap(buf))))
			copy(grown, buf)
			buf = grown
		}
		k, err := r.Read(buf[len(buf):min(int64(cap(buf)), n)])
		buf = buf[:len(buf)+k]
		if err == io.EOF && int64(len(buf)) < n {
			return nil, io.ErrUnexpectedEOF
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
	}
	return buf, nil
}

// trustedSize is the largest declared member size read into a buffer
// made at once.
const trustedSize = 64 << 20

func (r *Reader) tarErr(err error) error {
	where := fmt.Sprintf("after member %q", r.last)
	switch {
	case r.last == "" && r.at != "":
		where = r.at
	case r.last == "":
		where = "before its first member (not a sofa archive, or cut short)"
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{Err: &detailErr{ErrTruncated, "archive ends " + where}}
	}
	if readFailed(err) {
		return fmt.Errorf("archive: read the tar header %s: %w", where, err)
	}
	return &Error{Err: &detailErr{ErrFormat, "bad tar header " + where + ": " + err.Error()}}
}

// tailLimit is the most bytes read after the tar trailer: zeros (a tar
// writer's padding to its record size, 10,240 bytes by default) are
// taken; anything else, or more, is damage or another archive after this
// one, which a reader must not pass over in silence (cat a.sofa b.sofa
// restores a only).
const tailLimit = 64 << 10

// checkTail reads what follows the tar trailer of a stream: nothing, or
// zeros.
func (r *Reader) checkTail() error {
	if r.src == nil {
		return nil
	}
	buf := make([]byte, 4096)
	var n int64
	for {
		k, err := r.src.Read(buf)
		if i := bytes.IndexFunc(buf[:k], func(c rune) bool { return c != 0 }); i >= 0 {
			where := "right after its tar trailer"
			if at := n + int64(i); at > 0 {
				where = fmt.Sprintf("from byte %d past its tar trailer", at)
			}
			return &Error{Err: &detailErr{ErrFormat, "bytes after the archive's end (" + where + "): damage, or another archive appended"}}
		}
		n += int64(k)
		if n > tailLimit {
			return &Error{Err: &detailErr{ErrFormat, fmt.Sprintf("more than %d bytes after the archive's end", tailLimit)}}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return &Error{Err: &detailErr{ErrTruncated, "reading past the archive's end: " + err.Error()}}
		}
	}
}

func (r *Reader) dataErr(name string, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return memberErr(name, ErrTruncated, "archive ends inside this member")
	}
	if readFailed(err) {
		return fmt.Errorf("archive: read member %q: %w", name, err)
	}
	return memberErr(name, ErrFormat, err.Error())
}

// readFailed: err is the archive's storage failing to give its bytes (a
// file's I/O error, a lost S3 connection: the error chain is kept), not
// bytes that are not an archive's. Such an error is no *Error: nothing
// says the archive is damaged, and a rerun may read it whole.
func readFailed(err error) bool {
	return !errors.Is(err, tar.ErrHeader) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF)
}
