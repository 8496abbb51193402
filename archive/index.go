package archive

import (
	"archive/tar"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/sofadb/sofa/replicate"
)

// An Index locates the database groups of an archive that can be read at
// any offset (a file, an object; not stdin), so that several databases
// are read at once, each from its own offset. Scan builds it from the tar
// headers alone, skipping member bodies (but the small end members, read
// to check the manifest), and checks the manifest against the members
// listed: what a reader in order checks at the end is checked before any
// database is read. Each group's members are checked (checksums, records,
// end member) as OpenDB's reader reads them.
//
// An Index is safe for concurrent use; each DBReader it opens is not.
type Index struct {
	ra     io.ReaderAt
	opts   ReaderOptions
	hdr    Header
	groups []Group
	blobs  map[[32]byte]span
	gate   *memGate
	bufs   *bufBudget
	ahead  *aheadPool // nil: no read-ahead (ReaderOptions.ReadAhead 0)
}

// bufBudget holds the bytes of read buffers an Index's group readers may
// still take (ReaderOptions.ReadMemory). It never waits: a reader that
// finds it spent reads with a MinReadSize buffer.
type bufBudget struct {
	mu   sync.Mutex
	free int64
}

func (b *bufBudget) take(want int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(want, b.free)
	b.free -= n
	return n
}

func (b *bufBudget) give(n int64) {
	b.mu.Lock()
	b.free += n
	b.mu.Unlock()
}

// headSection reads an archive of size bytes from its start in reads of
// MinReadSize bytes.
func headSection(ra io.ReaderAt, size int64) io.Reader {
	return bufio.NewReaderSize(io.NewSectionReader(ra, 0, size), int(max(16, min(size, MinReadSize))))
}

// section is a reader of the span [off, off+size) of x's archive that
// reads it from the io.ReaderAt in reads of up to bufSize bytes (the tar
// reader's small reads would each be one ReadAt: one ranged GET on S3).
func (x *Index) section(off, size, bufSize int64) io.Reader {
	bufSize = min(max(bufSize, 16), max(size, 16))
	return bufio.NewReaderSize(io.NewSectionReader(x.ra, off, size), int(bufSize))
}

// memGate is a weighted semaphore of bytes.
type memGate struct {
	mu   sync.Mutex
	cond *sync.Cond
	cap  int64
	used int64
}

func newMemGate(n int64) *memGate {
	g := &memGate{cap: n}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// acquire waits until n bytes (at most the cap) are free, takes them and
// returns how many it took.
func (g *memGate) acquire(n int64) int64 {
	n = min(max(n, 0), g.cap)
	g.mu.Lock()
	for g.used+n > g.cap {
		g.cond.Wait()
	}
	g.used += n
	g.mu.Unlock()
	return n
}

func (g *memGate) release(n int64) {
	if n == 0 {
		return
	}
	g.mu.Lock()
	g.used -= n
	g.mu.Unlock()
	g.cond.Broadcast()
}

// Group is one database group of an indexed archive.
type Group struct {
	// Name is the database's name; Since the seq its incremental backup
	// started from (nil for a full backup of it), both from its end member.
	Name  string
	Since replicate.Seq
	// Offset and Size locate the group's members in the archive (tar
	// headers included).
	Offset, Size int64
}

type span struct{ off, size int64 }

func align512(n int64) int64 { return (n + 511) &^ 511 }

// Scan reads the tar headers of the archive ra (size bytes) and returns
// where each database group and blob is. opts are those of the readers
// OpenDB returns (nil: zero options). Errors are as NewReader's and
// Reader.Next's: the archive is damaged, or its manifest does not match.
func Scan(ra io.ReaderAt, size int64, opts *ReaderOptions) (*Index, error) {
	sr := io.NewSectionReader(ra, 0, size)
	// Version 2: the groups and blobs are where the archive's index says,
	// and the header is read in one buffer (one ranged GET on S3, not one
	// per tar read); version 1 is scanned from sr, whose position tells
	// each member's offset.
	toc, tocErr := ReadTOC(ra, size)
	var hr io.Reader = sr
	if tocErr == nil {
		hr = headSection(ra, size)
	}
	rd, err := NewReader(hr, opts)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	rd.sp = nil // members are skipped, not read
	mem := rd.opts.MemberMemory
	if mem <= 0 {
		mem = DefaultMemberMemory
	}
	if rd.opts.ReadSize <= 0 {
		rd.opts.ReadSize = DefaultReadSize
	}
	if rd.opts.ReadMemory <= 0 {
		rd.opts.ReadMemory = DefaultReadMemory
	}
	x := &Index{ra: ra, opts: rd.opts, hdr: rd.hdr, blobs: map[[32]byte]span{}, gate: newMemGate(mem), bufs: &bufBudget{free: rd.opts.ReadMemory},
		ahead: newAheadPool(rd.opts.ReadAhead, rd.opts.ReadSize)}
	if tocErr == nil {
		// no tar header is read but the manifest's, which is checked
		return x.fromTOC(toc)
	}
	pos, _ := sr.Seek(0, io.SeekCurrent) // after the header member's body
	var st scanState
	for {
		start := align512(pos)
		h, err := rd.tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, &Error{Err: &detailErr{ErrTruncated, fmt.Sprintf("archive ends after member %q without a manifest", rd.last)}}
		}
		if err != nil {
			return nil, rd.tarErr(err)
		}
		data, _ := sr.Seek(0, io.SeekCurrent)
		pos = data + h.Size
		m, err := rd.checkHeader(h)
		if err != nil {
			return nil, err
		}
		ms := []*member{m}
		switch {
		case m.p.kind == kindPack:
			// format version 3: its members are read to know what it holds
			first, err := rd.readBody(m, h)
			if err == nil {
				first, err = rd.unpack(first, start, data, h.Size)
			}
			if err != nil {
				return nil, err
			}
			ms = append([]*member{first}, rd.pending...)
			rd.pending = nil
		case m.rawSize < 0:
			// no SOFA records (format version 3): the checksums are the
			// content's
			if _, err := rd.readBody(m, h); err != nil {
				return nil, err
			}
		}
		for _, m := range ms {
			if err := x.scanned(rd, m, h, start, pos, &st); err != nil {
				return nil, err
			}
			if m.p.kind == kindManifest {
				return x, nil
			}
		}
	}
}

// scanState is what Scan knows between members: the group open and its
// directory.
type scanState struct {
	cur *Group
	dir string
}

// scanned notes one member found by Scan: a member of the archive whose
// tar header is h, from start to pos, or one of the members of the pack
// there (format version 3). A member whose content was not read is folded
// into the manifest's check from its header's records.
func (x *Index) scanned(rd *Reader, m *member, h *tar.Header, start, pos int64, st *scanState) error {
	inner := m.name != h.Name
	switch m.p.kind {
	case kindManifest:
		if st.cur != nil {
			return memberErr(m.name, ErrFormat, "manifest inside a database group")
		}
		return rd.finish(m)
	case kindMeta:
		if st.cur != nil {
			return memberErr(m.name, ErrFormat, "database group without its end member")
		}
		if rd.dirs[m.p.dir] {
			return memberErr(m.name, ErrFormat, "database appears twice")
		}
		rd.dirs[m.p.dir] = true
		st.cur, st.dir = &Group{Offset: start}, m.p.dir
	case kindBlob:
		if st.cur == nil {
			return memberErr(m.name, ErrFormat, "member outside its database group")
		}
		if _, ok := x.blobs[m.p.sum]; !ok {
			x.blobs[m.p.sum] = span{start, align512(pos) - start}
		}
		if !inner {
			if rd.groupStored == nil {
				rd.groupStored = map[string]int64{}
			}
			rd.groupStored[st.dir] += h.Size
		}
	case kindChunk:
		if st.cur == nil || !rd.dirs[m.p.dir] {
			return memberErr(m.name, ErrFormat, "member outside its database group")
		}
	case kindEnd:
		if st.cur == nil || !rd.dirs[m.p.dir] {
			return memberErr(m.name, ErrFormat, "member outside its database group")
		}
		if m.raw == nil {
			if _, err := rd.readBody(m, h); err != nil {
				return err
			}
		}
		var s DBSummary
		if err := s.UnmarshalJSON(m.raw); err != nil {
			return memberErr(m.name, ErrFormat, err.Error())
		}
		if s.Dir != m.p.dir || dbDir(s.Name) != s.Dir {
			return memberErr(m.name, ErrFormat, fmt.Sprintf("end member names database %q in directory %q", s.Name, m.p.dir))
		}
		if rd.hdr.Version >= 3 {
			s.StoredBytes = rd.groupStored[s.Dir] // see DBReader.finish
		}
		rd.summaries[s.Dir] = s
		rd.revisions += s.Revisions
		st.cur.Name, st.cur.Since = s.Name, s.Since
		st.cur.Size = align512(pos) - st.cur.Offset
		x.groups = append(x.groups, *st.cur)
		st.cur = nil
		return nil
	default:
		return memberErr(m.name, ErrFormat, "unexpected member")
	}
	if m.raw == nil && !inner {
		rd.fold(m, h.Size) // its content is skipped
	}
	return nil
}

// Header is the archive's header.
func (x *Index) Header() Header { return x.hdr }

// Groups lists the database groups in archive order.
func (x *Index) Groups() []Group { return x.groups }

// OpenDB returns a reader of one group (of Groups), independent of every
// other: attachment blobs stored by an earlier group are read at their
// offsets when a revision refers to them. Close it when done.
func (x *Index) OpenDB(g Group) (*DBReader, error) {
	// The group is read through a buffer of up to ReadSize bytes (its
	// whole span when smaller), taken from the Index's ReadMemory; with
	// ReadAhead, in chunks of that size fetched ahead, several at once.
	held := x.bufs.take(min(g.Size, x.opts.ReadSize))
	bufSize := max(held, min(g.Size, MinReadSize))
	var src io.Reader
	var ahead *aheadReader
	if x.ahead != nil {
		ahead = newAheadReader(x.ra, g.Offset, g.Size, bufSize, x.opts.ReadAhead, x.ahead)
		src = ahead
	} else {
		src = x.section(g.Offset, g.Size, bufSize)
	}
	rd := &Reader{tr: tar.NewReader(src), opts: x.opts, hdr: x.hdr,
		seen: sha256.New(), dirs: map[string]bool{}, summaries: map[string]DBSummary{}, fetch: x.blob, gate: x.gate,
		at: fmt.Sprintf("at the start of the group of database %q (byte %d of the archive)", g.Name, g.Offset)}
	rd.blobs = newBlobStore(rd.opts.TempDir, rd.opts.BlobMemory)
	rd.blobs.refetch = rd.opts.RefetchBlobs
	closeRd := func() {
		rd.Close()
		if ahead != nil {
			ahead.Close()
		}
		x.bufs.give(held)
	}
	db, err := rd.Next()
	if err != nil {
		closeRd()
		return nil, err
	}
	if db.Name() != g.Name {
		closeRd()
		return nil, &Error{Err: &detailErr{ErrFormat, fmt.Sprintf("group at offset %d holds %q, its end member says %q", g.Offset, db.Name(), g.Name)}}
	}
	db.release = closeRd
	db.readAhead()
	return db, nil
}

// blob reads the blob sum at its offset, checked; nil when the archive
// holds none.
func (x *Index) blob(sum [32]byte) ([]byte, error) {
	sp, ok := x.blobs[sum]
	if !ok {
		return nil, nil
	}
	return readBlobAt(x.section(sp.off, sp.size, MinReadSize), x.hdr, x.opts, sum)
}

// readBlobAt reads the blob sum from src, the bytes of its member (or of
// the pack holding it: format version 3), checked.
func readBlobAt(src io.Reader, hdr Header, opts ReaderOptions, sum [32]byte) ([]byte, error) {
	rd := &Reader{tr: tar.NewReader(src), opts: opts, hdr: hdr, seen: sha256.New()}
	defer rd.dec.close()
	m, err := rd.readMember()
	for err == nil && (m.p.kind != kindBlob || m.p.sum != sum) && len(rd.pending) > 0 {
		m, err = rd.readMember() // a pack's next member (format version 3)
	}
	if err != nil {
		return nil, err
	}
	if m.p.kind != kindBlob || m.p.sum != sum {
		return nil, memberErr(m.name, ErrFormat, "not the blob indexed at its offset")
	}
	return m.raw, nil
}

// fromTOC fills x from the archive's stored index (format version 2)
// instead of scanning every tar header: one read of the index, one of the
// manifest member (its checksum checked), then nothing until OpenDB.
func (x *Index) fromTOC(toc *TOC) (*Index, error) {
	if err := toc.checkManifest(x.section(toc.Manifest.Offset, toc.Manifest.End-toc.Manifest.Offset, MinReadSize), x.opts); err != nil {
		return nil, err
	}
	for _, d := range toc.Databases {
		x.groups = append(x.groups, Group{Name: d.Summary.Name, Since: d.Summary.Since, Offset: d.Offset, Size: d.End - d.Offset})
	}
	for _, b := range toc.Blobs {
		var sum [32]byte
		if raw, err := hex.DecodeString(b.SHA256); err != nil || len(raw) != len(sum) {
			return nil, &Error{Err: &detailErr{ErrFormat, fmt.Sprintf("index names blob %q", b.SHA256)}}
		} else {
			copy(sum[:], raw)
		}
		if _, ok := x.blobs[sum]; !ok {
			x.blobs[sum] = span{b.Offset, b.End - b.Offset}
		}
	}
	return x, nil
}
