package archive

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

// countReaderAt counts the bytes read from it.
type countReaderAt struct {
	r *bytes.Reader
	n atomic.Int64
}

func (c *countReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}
func (c *countReaderAt) Size() int64 { return c.r.Size() }

// Read fails: what reads through the index never reads in order.
func (c *countReaderAt) Read([]byte) (int, error) { return 0, errors.New("read in order") }

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// readIndexed reads the databases keep selects through NewIndexedReader.
func readIndexed(t *testing.T, r io.ReaderAt, idx *TOC, keep func(string) bool) map[string]*readDB {
	t.Helper()
	rd, err := NewIndexedReader(r, idx, keep, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	out := map[string]*readDB{}
	for {
		db, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		r := &readDB{}
		if err := db.Changes(context.Background(), nil, func(c replicate.Change) error {
			r.docs = append(r.docs, c.Docs...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		out[db.Name()] = r
	}
}

// TestIndex_SelectedGroupsOnly: a version 2 archive ends with its index
// and a FooterSize-byte footer just before the tar trailer. ReadTOC
// finds them with two reads; each database read alone through the index
// comes back whole (its blobs stored by another group included) while
// reading far less than the archive: never the 2 MiB of another group.
func TestTOC_SelectedGroupsOnly(t *testing.T) {
	shared := randomBytes(100 << 10)
	big := randomBytes(2 << 20)
	dbs := map[string][]*replicate.Doc{
		"one":   {doc("a", "1-a", false, `{"n":1}`, att("s.bin", "application/octet-stream", "", shared, int64(len(shared)), 1))},
		"big":   {doc("b", "1-b", false, `{"n":2}`, att("big.bin", "application/octet-stream", "", big, int64(len(big)), 1))},
		"two":   {doc("c", "1-c", false, `{"n":3}`, att("s.bin", "application/octet-stream", "", shared, int64(len(shared)), 1)), doc("d", "1-d", false, `{"n":4}`)},
		"three": {doc("e", "1-e", false, `{"n":5}`)},
	}
	order := []string{"one", "big", "two", "three"}
	data := writeArchive(t, Options{}, dbs, order)
	if h, _ := readArchive(t, data); h.Version != FormatVersion {
		t.Fatalf("version %d", h.Version)
	}
	if _, err := Verify(bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}
	size := int64(len(data))
	if !bytes.Equal(data[size-tarTrailer:], make([]byte, tarTrailer)) || !bytes.HasPrefix(data[size-tarTrailer-FooterSize:], []byte(`{"format":"sofa-archive-footer"`)) {
		t.Fatal("the footer is not the FooterSize bytes before the tar trailer")
	}

	cr := &countReaderAt{r: bytes.NewReader(data)}
	idx, err := ReadTOC(cr, size)
	if err != nil {
		t.Fatal(err)
	}
	if got := cr.n.Load(); got > FooterSize+tarTrailer+8<<10 {
		t.Errorf("ReadTOC read %d bytes", got)
	}
	var names []string
	for _, d := range idx.Databases {
		names = append(names, d.Summary.Name)
	}
	if !slices.Equal(names, order) || len(idx.Blobs) != 2 || idx.Header.Version != FormatVersion {
		t.Fatalf("index: databases %v, %d blobs", names, len(idx.Blobs))
	}
	sum := sha256.Sum256(shared)
	if two := idx.Databases[2]; !slices.Equal(two.ExternBlobs, []string{hex.EncodeToString(sum[:])}) {
		t.Errorf("two's extern blobs %v, want the one stored by one", two.ExternBlobs)
	}
	if h, sums, err := List(cr); err != nil || h.ID != idx.ID || len(sums) != 4 || sums[0].Name != "big" {
		t.Errorf("List through the index: %v %v", sums, err)
	}

	for _, name := range order {
		cr.n.Store(0)
		got := readIndexed(t, cr, idx, func(n string) bool { return n == name })
		if len(got) != 1 || got[name] == nil {
			t.Fatalf("%s alone: read %v", name, got)
		}
		equalDocs(t, name, got[name].docs, dbs[name])
		if name != "big" && cr.n.Load() > 1<<20 {
			t.Errorf("%s alone: read %d of %d bytes", name, cr.n.Load(), size)
		}
	}
	got := readIndexed(t, cr, idx, func(n string) bool { return n == "two" || n == "three" })
	if len(got) != 2 {
		t.Fatalf("two and three: %v", got)
	}
}

// TestIndex_Spooled: a database written while another owns the stream is
// spooled and appended later; a blob the other group stored meanwhile is
// dropped from it, and the index lists it as extern for the spooled one.
func TestTOC_Spooled(t *testing.T) {
	shared := randomBytes(50 << 10)
	ctx := context.Background()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Options{})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := w.Database("first")
	second, _ := w.Database("second") // spooled: first owns the stream
	d2 := []*replicate.Doc{doc("x", "1-x", false, `{}`, att("s", "application/octet-stream", "", shared, int64(len(shared)), 1))}
	d1 := []*replicate.Doc{doc("y", "1-y", false, `{}`, att("s", "application/octet-stream", "", shared, int64(len(shared)), 1))}
	for _, c := range []struct {
		d    *DBWriter
		docs []*replicate.Doc
	}{{second, d2}, {first, d1}} {
		if rej, err := c.d.WriteDocs(ctx, c.docs); err != nil || len(rej) > 0 {
			t.Fatal(rej, err)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	if _, err := Verify(bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}
	r := bytes.NewReader(data)
	idx, err := ReadTOC(r, r.Size())
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Blobs) != 1 || len(idx.Databases) != 2 || idx.Databases[1].Summary.Name != "second" || len(idx.Databases[1].ExternBlobs) != 1 {
		t.Fatalf("index: %+v", idx)
	}
	got := readIndexed(t, r, idx, func(n string) bool { return n == "second" })
	equalDocs(t, "second", got["second"].docs, d2)
}

// TestIndex_Version1AndDamage: a version 1 archive has no index (List
// reads it in order, as before); an index whose bytes changed is refused
// by ReadTOC (its SHA-256 is in the footer) and by an in-order read
// (its tar header's), and List then falls back to the manifest.
func TestTOC_Version1AndDamage(t *testing.T) {
	v1, err := os.ReadFile("testdata/full-records.sofa")
	if err != nil {
		t.Fatal(err)
	}
	r := bytes.NewReader(v1)
	if _, err := ReadTOC(r, r.Size()); !errors.Is(err, ErrNoIndex) {
		t.Fatalf("ReadTOC of version 1: %v", err)
	}
	if h, dbs, err := List(r); err != nil || h.Version != 1 || len(dbs) != 1 {
		t.Fatalf("List of version 1: %v %v %v", h, dbs, err)
	}

	data := writeArchive(t, Options{}, map[string][]*replicate.Doc{"db": {doc("a", "1-a", false, `{"n":1}`)}}, []string{"db"})
	r = bytes.NewReader(data)
	_, err = ReadTOC(r, r.Size())
	if err != nil {
		t.Fatal(err)
	}
	var f footer
	if err := json.Unmarshal(bytes.TrimSpace(data[len(data)-tarTrailer-FooterSize:len(data)-tarTrailer]), &f); err != nil {
		t.Fatal(err)
	}
	bad := slices.Clone(data)
	bad[f.IndexOffset+f.IndexSize/2] ^= 0x01
	r = bytes.NewReader(bad)
	if _, err := ReadTOC(r, r.Size()); !errors.Is(err, ErrChecksum) {
		t.Errorf("ReadTOC of a changed index: %v", err)
	}
	if _, err := Verify(bytes.NewReader(bad), nil); !errors.Is(err, ErrChecksum) {
		t.Errorf("Verify of a changed index: %v", err)
	}
	// List falls back on reading in order, and meets the changed index
	// there too: the damage is told, not passed over.
	if _, _, err := List(r); !errors.Is(err, ErrChecksum) {
		t.Errorf("List with a changed index: %v, want ErrChecksum", err)
	}
}
