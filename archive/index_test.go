package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

// TestIndexReadsGroupsAtOnce: the groups of an archive read from their
// offsets, all at once, give what a reader in order gives, attachments
// stored once in an earlier group included (every group but the first
// refers to the shared blob the first stored), with or without reading
// ahead (in chunks of 256 bytes: many per group).
func TestIndexReadsGroupsAtOnce(t *testing.T) {
	for _, c := range []Compression{Zstd, None} {
		for _, mem := range []int64{0, 1} { // 1: one member held at a time in all
			for _, ahead := range []int{0, 3} {
				t.Run(fmt.Sprint(c, mem, ahead), func(t *testing.T) { indexRead(t, c, mem, ahead) })
			}
		}
	}
}

func indexRead(t *testing.T, c Compression, mem int64, ahead int) {
	{
		{
			dbs := map[string][]*replicate.Doc{}
			for _, n := range hostileNames {
				dbs[n] = sampleDocs()
			}
			data := writeArchive(t, Options{Compression: c, ChunkSize: 300}, dbs, hostileNames)
			_, want := readArchive(t, data)
			x, err := Scan(bytes.NewReader(data), int64(len(data)), &ReaderOptions{BlobMemory: -1, MemberMemory: mem, ReadAhead: ahead, ReadSize: 256})
			if err != nil {
				t.Fatal(err)
			}
			if len(x.Groups()) != len(hostileNames) {
				t.Fatalf("%d groups, want %d", len(x.Groups()), len(hostileNames))
			}
			var wg sync.WaitGroup
			got := make([][]*replicate.Doc, len(x.Groups()))
			errs := make([]error, len(x.Groups()))
			for i, g := range x.Groups() {
				wg.Go(func() {
					db, err := x.OpenDB(g)
					if err != nil {
						errs[i] = err
						return
					}
					defer db.Close()
					errs[i] = db.Changes(context.Background(), nil, func(ch replicate.Change) error {
						got[i] = append(got[i], ch.Docs...)
						return nil
					})
					if s, ok := db.Summary(); errs[i] == nil && (!ok || s.Name != g.Name) {
						t.Errorf("%q: no end summary", g.Name)
					}
				})
			}
			wg.Wait()
			for i, g := range x.Groups() {
				if errs[i] != nil {
					t.Fatalf("%q: %v", g.Name, errs[i])
				}
				equalDocs(t, g.Name, got[i], want[g.Name].docs)
			}
			if x.gate.used != 0 {
				t.Errorf("%d bytes still held after every reader closed", x.gate.used)
			}
			if p := x.ahead; p != nil && len(p.spare) != cap(p.spare) {
				t.Errorf("%d of %d read-ahead buffers back after every reader closed", len(p.spare), cap(p.spare))
			}
		}
	}
}

// TestIndexDamage: a damaged doc chunk fails its own group's reader only
// (named, ErrChecksum); a damaged manifest fails the scan.
func TestIndexDamage(t *testing.T) {
	dbs := map[string][]*replicate.Doc{"a": sampleDocs(), "b": sampleDocs()}
	data := writeArchive(t, Options{Compression: None, ChunkSize: 300, Version: 2}, dbs, []string{"a", "b"})
	bad := bytes.Clone(data)
	i := bytes.Index(bad, []byte(`"conflicted"`))
	if i < 0 {
		t.Fatal("no record found")
	}
	bad[i+1] ^= 0x20 // first group's first chunk
	x, err := Scan(bytes.NewReader(bad), int64(len(bad)), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range x.Groups() {
		db, err := x.OpenDB(g)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Changes(context.Background(), nil, func(replicate.Change) error { return nil })
		db.Close()
		if (g.Name == "a") != errors.Is(err, ErrChecksum) {
			t.Errorf("%s: %v", g.Name, err)
		}
	}
	bad = bytes.Clone(data)
	j := bytes.LastIndex(bad, []byte(`"totals"`))
	bad[j+1] ^= 0x20
	if _, err := Scan(bytes.NewReader(bad), int64(len(bad)), nil); !errors.Is(err, ErrChecksum) {
		t.Errorf("damaged manifest: %v", err)
	}
}

// callCounter counts ReadAt calls (each a ranged GET on S3).
type callCounter struct {
	r     *bytes.Reader
	mu    sync.Mutex
	calls int
}

func (c *callCounter) ReadAt(p []byte, off int64) (int, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.r.ReadAt(p, off)
}

// TestIndexGroupReadsBuffered: a group reader of an Index reads its
// group from the io.ReaderAt through one buffer (a group of small
// members: one ReadAt, plus one per blob it refers to in an earlier
// group),
// not once per small read of the tar reader, whether it got its buffer
// from ReadMemory or, that spent, the MinReadSize one; every buffer
// byte goes back to ReadMemory on Close.
func TestIndexGroupReadsBuffered(t *testing.T) {
	dbs := map[string][]*replicate.Doc{}
	for _, n := range hostileNames {
		dbs[n] = sampleDocs()
	}
	data := writeArchive(t, Options{Compression: Zstd, ChunkSize: 300}, dbs, hostileNames)
	for _, readMem := range []int64{0, 1} { // 1: spent at once
		t.Run(fmt.Sprint(readMem), func(t *testing.T) {
			ra := &callCounter{r: bytes.NewReader(data)}
			x, err := Scan(ra, int64(len(data)), &ReaderOptions{ReadMemory: readMem})
			if err != nil {
				t.Fatal(err)
			}
			var open []*DBReader
			for _, g := range x.Groups() {
				ra.calls = 0
				db, err := x.OpenDB(g)
				if err != nil {
					t.Fatal(err)
				}
				open = append(open, db) // all open at once: the budget runs out
				if err := db.Changes(context.Background(), nil, func(replicate.Change) error { return nil }); err != nil {
					t.Fatal(err)
				}
				// the group in one, and each of the 3 blobs the first
				// group stored in one
				if ra.calls > 4 {
					t.Errorf("group %q (%d bytes): %d ReadAt calls, want at most 4", g.Name, g.Size, ra.calls)
				}
			}
			for _, db := range open {
				db.Close()
			}
			if want := x.opts.ReadMemory; x.bufs.free != want {
				t.Errorf("ReadMemory %d after every reader closed, want %d", x.bufs.free, want)
			}
		})
	}
}

// TestReadHeaderAtOffsets: ReadHeader of an archive readable at offsets
// reads it there (never in order: on S3 that fetches parts ahead) and
// reads one buffer of at most MinReadSize bytes.
func TestReadHeaderAtOffsets(t *testing.T) {
	dbs := map[string][]*replicate.Doc{}
	for _, n := range hostileNames {
		dbs[n] = sampleDocs()
	}
	data := writeArchive(t, Options{Compression: Zstd, ChunkSize: 300}, dbs, hostileNames)
	cr := &countReaderAt{r: bytes.NewReader(data)} // Read fails
	h, err := ReadHeader(cr)
	if err != nil {
		t.Fatal(err)
	}
	if h.ID == "" {
		t.Errorf("header without an id: %+v", h)
	}
	if n := cr.n.Load(); n > MinReadSize {
		t.Errorf("ReadHeader read %d bytes, want at most %d", n, MinReadSize)
	}
	if _, err := ReadHeader(bytes.NewReader(data)); err != nil { // in order
		t.Fatal(err)
	}
}

// TestIndexDamagedFirstHeader: a damaged tar header at the start of a
// group read at its offset is told as such (which database, where), not
// as an archive damaged before its first member.
func TestIndexDamagedFirstHeader(t *testing.T) {
	dbs := map[string][]*replicate.Doc{"a": sampleDocs(), "b": sampleDocs()}
	data := writeArchive(t, Options{Compression: None}, dbs, []string{"a", "b"})
	x, err := Scan(bytes.NewReader(data), int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	g := x.Groups()[1]
	bad := bytes.Clone(data)
	bad[g.Offset+148] ^= 0x01 // its first tar header's checksum field
	x, err = Scan(bytes.NewReader(bad), int64(len(bad)), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.OpenDB(x.Groups()[1])
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `group of database "b"`) || strings.Contains(err.Error(), "first member") {
		t.Errorf("OpenDB of a group whose first header is damaged: %v", err)
	}
}

// TestIndexRefetchBlobs (found by a new user: a restore from an archive
// file spilled every attachment to TMPDIR and failed on a small /tmp):
// with RefetchBlobs a group reader keeps no blob past BlobMemory and
// reads it again at its offset, so no temporary file is written (the
// TempDir here does not exist: a spill fails, as it does without
// RefetchBlobs).
func TestIndexRefetchBlobs(t *testing.T) {
	dbs := map[string][]*replicate.Doc{}
	for _, n := range hostileNames {
		dbs[n] = sampleDocs()
	}
	data := writeArchive(t, Options{Compression: Zstd, ChunkSize: 300}, dbs, hostileNames)
	_, want := readArchive(t, data)
	noDir := t.TempDir() + "/missing"
	read := func(refetch bool) error {
		x, err := Scan(bytes.NewReader(data), int64(len(data)), &ReaderOptions{BlobMemory: 1, TempDir: noDir, RefetchBlobs: refetch})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range x.Groups() {
			db, err := x.OpenDB(g)
			if err != nil {
				return err
			}
			var got []*replicate.Doc
			err = db.Changes(context.Background(), nil, func(ch replicate.Change) error {
				got = append(got, ch.Docs...)
				return nil
			})
			db.Close()
			if err != nil {
				return err
			}
			equalDocs(t, g.Name, got, want[g.Name].docs)
		}
		return nil
	}
	if err := read(true); err != nil {
		t.Fatalf("with RefetchBlobs: %v", err)
	}
	if err := read(false); err == nil || !strings.Contains(err.Error(), "spill") {
		t.Fatalf("without RefetchBlobs: %v, want a failed spill (the case spills)", err)
	}
}
