package archive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
)

// An archive of version 2 ends with two more members after the manifest,
// so that a reader that can read at an offset (a file, ranged GETs on an
// object store) finds any database without reading the others:
//
//	index.json.gz where each database group, each blob and the manifest
//	              are (byte spans of the file), with the header and the
//	              database summaries: all that `sofa ls` prints
//	footer.json   exactly FooterSize bytes pointing at the index
//
// then the tar trailer (two zero blocks, 1024 bytes). The footer's
// content is therefore the FooterSize bytes just before the trailer, at
// size-1024-FooterSize.

const (
	indexName  = "index.json.gz" // gzip: small, and no large encoder to hold
	footerName = "footer.json"
	// IndexFormat and FooterFormat name the index and footer members.
	IndexFormat  = "sofa-archive-index"
	FooterFormat = "sofa-archive-footer"
	// FooterSize is the footer member's content size: its JSON padded with
	// spaces and ended by a newline.
	FooterSize = 512
	// tarTrailer is the tar end-of-archive marker: two zero blocks.
	tarTrailer = 1024
)

// ErrNoIndex: the archive has no index (version 1, or not readable at an
// offset): read it in order instead.
var ErrNoIndex = errors.New("archive has no index")

// Span is a byte range [Offset, End) of the archive: a member's tar
// headers (PAX included), content and padding, or a run of members.
type Span struct {
	Offset int64 `json:"offset"`
	End    int64 `json:"end"`
}

// TOCDB is one database group in the index.
type TOCDB struct {
	Span
	// Summary is the group's end member's summary, as in the manifest.
	Summary DBSummary `json:"summary"`
	// ExternBlobs are the SHA-256 (hex) of blobs its documents refer to
	// that are stored in another group (each is stored once per archive).
	ExternBlobs []string `json:"extern_blobs,omitempty"`
}

// TOCBlob is where one blob member is.
type TOCBlob struct {
	Span
	SHA256 string `json:"sha256"` // of its uncompressed bytes, as in its name
}

// TOC is the content of index.json.
type TOC struct {
	Format    string    `json:"format"` // IndexFormat
	Version   int       `json:"version"`
	ID        string    `json:"id"`
	Header    Header    `json:"header"`
	HeaderAt  Span      `json:"header_member"`
	Databases []TOCDB   `json:"databases"` // in archive order
	Blobs     []TOCBlob `json:"blobs"`     // in archive order
	Manifest  Span      `json:"manifest"`
}

// footer is the content of footer.json.
type footer struct {
	Format       string `json:"format"` // FooterFormat
	Version      int    `json:"version"`
	ID           string `json:"id"`
	IndexOffset  int64  `json:"index_offset"` // of the index member's stored bytes
	IndexSize    int64  `json:"index_size"`   // stored (gzip) bytes
	IndexSHA256  string `json:"index_sha256"` // of the stored bytes
	IndexRawSize int64  `json:"index_raw_size"`
}

func (f footer) encode() ([]byte, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	if len(b) > FooterSize-1 {
		return nil, fmt.Errorf("archive: footer of %d bytes", len(b))
	}
	out := bytes.Repeat([]byte{' '}, FooterSize)
	copy(out, b)
	out[FooterSize-1] = '\n'
	return out, nil
}

// ReaderAtSize is what reading by offset needs: an io.ReaderAt that knows
// its size (a storage.Reader).
type ReaderAtSize interface {
	io.ReaderAt
	Size() int64
}

// maxFooterHeaders is the most bytes of tar headers the footer member
// may have (sofa writes 1,536: a PAX header, its records, the header).
const maxFooterHeaders = 4096

// ReadTOC reads the footer at the end of an archive of size bytes and
// the index it points at, with two ReadAt calls and nothing else. It
// returns an error wrapping ErrNoIndex when there is none (a version 1
// archive; a reader that cannot ReadAt), and ErrChecksum when the index
// does not match the footer.
func ReadTOC(r io.ReaderAt, size int64) (*TOC, error) {
	if size < FooterSize+tarTrailer+1024 {
		return nil, ErrNoIndex
	}
	tail := make([]byte, FooterSize+tarTrailer)
	if _, err := r.ReadAt(tail, size-int64(len(tail))); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoIndex, err)
	}
	if len(bytes.Trim(tail[FooterSize:], "\x00")) != 0 || !bytes.HasPrefix(tail, []byte(`{"format":"`+FooterFormat+`"`)) {
		return nil, ErrNoIndex
	}
	var f footer
	if err := json.Unmarshal(bytes.TrimRight(tail[:FooterSize], " \n"), &f); err != nil {
		return nil, memberErr(footerName, ErrFormat, err.Error())
	}
	if f.Version != tocVersion {
		return nil, memberErr(footerName, ErrVersion, fmt.Sprintf("footer version %d", f.Version))
	}
	if f.IndexOffset < 0 || f.IndexSize <= 0 || f.IndexSize > DefaultMaxMemberSize || f.IndexOffset+f.IndexSize > size-int64(len(tail)) {
		return nil, memberErr(footerName, ErrFormat, fmt.Sprintf("index at %d+%d outside the archive of %d bytes", f.IndexOffset, f.IndexSize, size))
	}
	raw := make([]byte, f.IndexSize)
	if _, err := r.ReadAt(raw, f.IndexOffset); err != nil {
		return nil, memberErr(indexName, ErrTruncated, err.Error())
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != f.IndexSHA256 {
		return nil, memberErr(indexName, ErrChecksum, "bytes do not match the SHA-256 in the footer")
	}
	// The footer member follows the index member: between the index's
	// padded end and the footer's content lie only the footer's tar
	// headers. A second archive appended to a first (cat a.sofa a.sofa)
	// ends with a footer whose offsets, relative to its own start, point
	// into the first.
	if gap := size - int64(len(tail)) - (f.IndexOffset+f.IndexSize+511)/512*512; gap < 512 || gap > maxFooterHeaders {
		return nil, memberErr(footerName, ErrFormat, fmt.Sprintf("%d bytes between the index and the footer: another archive's footer, or damage", gap))
	}
	if f.IndexRawSize <= 0 || f.IndexRawSize > DefaultMaxMemberSize {
		return nil, memberErr(footerName, ErrFormat, fmt.Sprintf("index of %d bytes", f.IndexRawSize))
	}
	var dec decoders
	defer dec.close()
	js, err := dec.decompress(indexName, Gzip, raw, f.IndexRawSize)
	if err != nil {
		return nil, err
	}
	return parseIndex(js, f.ID)
}

func parseIndex(raw []byte, id string) (*TOC, error) {
	var idx TOC
	if err := json.Unmarshal(raw, &idx); err != nil {
		return nil, memberErr(indexName, ErrFormat, err.Error())
	}
	if idx.Format != IndexFormat || idx.Version != tocVersion {
		return nil, memberErr(indexName, ErrVersion, fmt.Sprintf("format %q version %d", idx.Format, idx.Version))
	}
	if idx.ID != id || idx.Header.ID != id {
		return nil, memberErr(indexName, ErrManifest, "archive id differs from the footer's")
	}
	// the header it copies: an index exists from version 2 on
	if h := idx.Header; h.Format != FormatName || h.Version < 2 || h.Version > FormatVersion {
		return nil, memberErr(indexName, ErrVersion, fmt.Sprintf("its header says format %q version %d", h.Format, h.Version))
	}
	return &idx, nil
}

// Summaries are the databases of the index sorted by name, as List
// returns them.
func (x *TOC) Summaries() []DBSummary {
	out := make([]DBSummary, 0, len(x.Databases))
	for _, d := range x.Databases {
		out = append(out, d.Summary)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// NewIndexedReader reads only the databases keep selects from an
// archive readable at offsets, with its index: the header member, then
// for each kept database (in archive order) the blobs of other groups it
// refers to and its own group; nothing else is read. Each member is
// checked as by NewReader, each group's references and end member too;
// the manifest is not read (Verify checks a whole archive). Next returns
// io.EOF after the last kept database.
func NewIndexedReader(r io.ReaderAt, idx *TOC, keep func(name string) bool, opts *ReaderOptions) (*Reader, error) {
	blobAt := make(map[string]Span, len(idx.Blobs))
	for _, b := range idx.Blobs {
		blobAt[b.SHA256] = b.Span
	}
	parts := []io.Reader{section(r, idx.HeaderAt)}
	added := map[string]bool{}
	for _, d := range idx.Databases {
		if !keep(d.Summary.Name) {
			continue
		}
		var extern []Span
		for _, s := range d.ExternBlobs {
			sp, ok := blobAt[s]
			if !ok {
				return nil, memberErr(indexName, ErrMissingBlob, fmt.Sprintf("database %q refers to blob %s the index does not place", d.Summary.Name, s))
			}
			if !added[s] {
				added[s] = true
				extern = append(extern, sp)
			}
		}
		sort.Slice(extern, func(i, j int) bool { return extern[i].Offset < extern[j].Offset })
		if idx.Header.Version < 3 {
			for _, sp := range extern {
				parts = append(parts, section(r, sp))
			}
		}
		parts = append(parts, section(r, d.Span))
	}
	// the tar trailer ends the stream the tar reader sees
	parts = append(parts, bytes.NewReader(make([]byte, tarTrailer)))
	rd, err := NewReader(io.MultiReader(parts...), opts)
	if err != nil {
		return nil, err
	}
	rd.partial = true
	rd.sp = nil // offsets of sections, not of the archive
	if idx.Header.Version >= 3 {
		// a blob of another group may be in one of its packs, with that
		// group's other members: it is read alone when a record refers
		// to it
		o := rd.opts
		rd.fetch = func(sum [32]byte) ([]byte, error) {
			sp, ok := blobAt[hex.EncodeToString(sum[:])]
			if !ok {
				return nil, nil
			}
			return readBlobAt(section(r, sp), rd.hdr, o, sum)
		}
	}
	return rd, nil
}

// CheckManifest reads the manifest member where the index places it in
// r and checks it against the SHA-256 of its tar header: a reader that
// reads only some groups (NewIndexedReader) never reaches the manifest,
// whose damage would then go unreported. opts may be nil. Errors are
// *Error (ErrChecksum, ErrFormat, ErrTruncated...).
func (x *TOC) CheckManifest(r io.ReaderAt, opts *ReaderOptions) error {
	o := ReaderOptions{}
	if opts != nil {
		o = *opts
	}
	if o.MaxMemberSize <= 0 {
		o.MaxMemberSize = DefaultMaxMemberSize
	}
	return x.checkManifest(section(r, x.Manifest), o)
}

// checkManifest reads the manifest member from src (its span), checks
// its stored bytes' SHA-256, and that it agrees with the index: the same
// archive id and version, and the same databases with the same summaries
// (the index holds the manifest's copy of each). An index that a forger
// or a bug made disagree (a database left out, another group pointed at,
// other checkpoints for the next --since) then makes its readers read
// the archive in order, which checks the manifest against every member.
func (x *TOC) checkManifest(src io.Reader, opts ReaderOptions) error {
	rd := &Reader{tr: tar.NewReader(src), opts: opts, seen: sha256.New()}
	defer rd.dec.close()
	m, err := rd.readMember()
	if err != nil {
		return err
	}
	if m.p.kind != kindManifest {
		return memberErr(m.name, ErrFormat, "the index's manifest span holds another member")
	}
	man, _, err := rd.readManifest(m.name, m.p.codec, m.sum, m.rawSum)
	if err != nil {
		return err
	}
	return x.agrees(m.name, man)
}

// agrees checks the manifest man against the index x.
func (x *TOC) agrees(name string, man Manifest) error {
	if man.Format != FormatName || man.Version != x.Header.Version || man.ID != x.ID {
		return memberErr(name, ErrManifest, fmt.Sprintf("format %q version %d id %q differ from the index's", man.Format, man.Version, man.ID))
	}
	if len(man.Databases) != len(x.Databases) {
		return memberErr(name, ErrManifest, fmt.Sprintf("lists %d databases, the index %d", len(man.Databases), len(x.Databases)))
	}
	byDir := make(map[string]DBSummary, len(x.Databases))
	for _, d := range x.Databases {
		byDir[d.Summary.Dir] = d.Summary
	}
	for _, s := range man.Databases {
		if got, ok := byDir[s.Dir]; !ok || !sameSummary(got, s) {
			return memberErr(name, ErrManifest, fmt.Sprintf("database %q differs from the index's", s.Name))
		}
	}
	return nil
}

// sameSummary reports whether two summaries of a database say the same
// in every field (as written: the index holds the manifest's copy).
func sameSummary(a, b DBSummary) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ja, jb)
}

// section reads the span s of r through a buffer of at most
// DefaultReadSize bytes, taken at its first Read and dropped at its end:
// one ReadAt (one ranged GET on S3) per buffer, not one per small read of
// the tar reader.
func section(r io.ReaderAt, s Span) io.Reader {
	return &lazySection{sr: io.NewSectionReader(r, s.Offset, s.End-s.Offset)}
}

type lazySection struct {
	sr   *io.SectionReader
	br   *bufio.Reader
	done bool
}

func (l *lazySection) Read(p []byte) (int, error) {
	if l.br == nil {
		if l.done {
			return 0, io.EOF
		}
		l.br = bufio.NewReaderSize(l.sr, int(min(max(l.sr.Size(), 16), DefaultReadSize)))
	}
	n, err := l.br.Read(p)
	if err == io.EOF {
		l.br, l.done = nil, true
	}
	return n, err
}

// indexer records, as the writer goes, where members are.
type indexer struct {
	idx     TOC
	groupAt map[string]int64      // dir -> offset of its meta member
	groups  map[string]Span       // dir -> its group's span
	order   []string              // dirs in archive order
	refs    map[string][][32]byte // dir -> blobs its documents refer to
	// blobSeen are the blobs indexed
	blobSeen map[[32]byte]bool
}

func newIndexer(h Header) *indexer {
	return &indexer{
		idx:     TOC{Format: IndexFormat, Version: tocVersion, ID: h.ID, Header: h},
		groupAt: map[string]int64{}, groups: map[string]Span{}, refs: map[string][][32]byte{}, blobSeen: map[[32]byte]bool{},
	}
}

// member notes one member written at [start, end).
func (x *indexer) member(name string, start, end int64) {
	p, err := parseName(name)
	if err != nil {
		return
	}
	switch p.kind {
	case kindHeader:
		x.idx.HeaderAt = Span{start, end}
	case kindMeta:
		x.groupAt[p.dir] = start
	case kindEnd:
		x.groups[p.dir] = Span{x.groupAt[p.dir], end}
		x.order = append(x.order, p.dir)
	case kindBlob:
		if x.blobSeen[p.sum] {
			return // stored again (format version 3 keeps repeats): the first is indexed
		}
		x.blobSeen[p.sum] = true
		x.idx.Blobs = append(x.idx.Blobs, TOCBlob{Span: Span{start, end}, SHA256: hex.EncodeToString(p.sum[:])})
	case kindManifest:
		x.idx.Manifest = Span{start, end}
	}
}

// encode builds index.json from the groups, blobs and summaries noted.
func (x *indexer) encode(summaries []DBSummary) ([]byte, error) {
	byDir := map[string]DBSummary{}
	for _, s := range summaries {
		byDir[s.Dir] = s
	}
	for _, dir := range x.order {
		sp := x.groups[dir]
		d := TOCDB{Span: sp, Summary: byDir[dir]}
		seen := map[[32]byte]bool{}
		own := map[string]bool{}
		// blobs are in archive order: those inside the group's span
		blobs := x.idx.Blobs
		for i := sort.Search(len(blobs), func(i int) bool { return blobs[i].Offset >= sp.Offset }); i < len(blobs) && blobs[i].End <= sp.End; i++ {
			own[blobs[i].SHA256] = true
		}
		for _, s := range x.refs[dir] {
			h := hex.EncodeToString(s[:])
			if !seen[s] && !own[h] {
				d.ExternBlobs = append(d.ExternBlobs, h)
			}
			seen[s] = true
		}
		sort.Strings(d.ExternBlobs)
		x.idx.Databases = append(x.idx.Databases, d)
	}
	if x.idx.Databases == nil {
		x.idx.Databases = []TOCDB{}
	}
	if x.idx.Blobs == nil {
		x.idx.Blobs = []TOCBlob{}
	}
	b, err := json.Marshal(x.idx)
	if err != nil {
		return nil, fmt.Errorf("archive: index: %w", err)
	}
	return append(b, '\n'), nil
}
