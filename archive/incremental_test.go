package archive

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

func TestIncrementalChain(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write := func(path string, since *Since, docs map[string][]*replicate.Doc, seq string, inst string) Header {
		t.Helper()
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w, err := NewWriter(f, Options{Since: since})
		if err != nil {
			t.Fatal(err)
		}
		for name, ds := range docs {
			d, err := w.Database(name)
			if err != nil {
				t.Fatal(err)
			}
			d.SetSourceInfo(replicate.DBInfo{Name: name, InstanceStart: inst})
			if since != nil && name == "kept" && inst == "1" {
				// the engine starts from the previous seq and finds its checkpoint
				if got := string(d.Since()); got != `"7-x"` {
					t.Errorf("Since() = %s, want \"7-x\"", got)
				}
				cp, err := d.GetLocal(ctx, "_local/rep")
				if err != nil || !bytes.Contains(cp, []byte(`"7-x"`)) {
					t.Errorf("GetLocal = %s, %v", cp, err)
				}
			}
			if since != nil && name == "kept" && inst == "2" && d.Since() != nil {
				t.Errorf("recreated database: Since() = %s, want nil", d.Since())
			}
			if _, err := d.WriteDocs(ctx, ds); err != nil {
				t.Fatal(err)
			}
			if err := d.PutLocal(ctx, "rep", []byte(`{"session_id":"s","source_last_seq":`+seq+`}`)); err != nil {
				t.Fatal(err)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return w.Header()
	}
	full := filepath.Join(dir, "full.sofa")
	h0 := write(full, nil, map[string][]*replicate.Doc{
		"kept":  {doc("a", "1-a", false, `{"_id":"a","_rev":"1-a"}`)},
		"other": {doc("b", "1-b", false, `{"_id":"b","_rev":"1-b"}`)},
	}, `"7-x"`, "1")
	s1, err := readSinceFile(t, full)
	if err != nil {
		t.Fatal(err)
	}
	if s1.ArchiveID != h0.ID || string(s1.Databases["kept"].Seq) != `"7-x"` || s1.Databases["kept"].InstanceStart != "1" {
		t.Fatalf("ReadSince = %+v", s1)
	}
	inc1 := filepath.Join(dir, "inc1.sofa")
	h1 := write(inc1, s1, map[string][]*replicate.Doc{
		"kept": {doc("a", "2-a", false, `{"_id":"a","_rev":"2-a"}`)},
	}, `"9-y"`, "1")
	s2, err := readSinceFile(t, inc1)
	if err != nil {
		t.Fatal(err)
	}
	// "other" is carried forward from the full backup
	if string(s2.Databases["other"].Seq) != `"7-x"` || string(s2.Databases["kept"].Seq) != `"9-y"` {
		t.Fatalf("readSinceFile(t, inc1) = %+v", s2.Databases)
	}
	inc2 := filepath.Join(dir, "inc2.sofa")
	h2 := write(inc2, s2, map[string][]*replicate.Doc{
		"kept": {doc("c", "1-c", false, `{"_id":"c","_rev":"1-c"}`)},
	}, `"3-z"`, "2")

	if err := CheckChain(h0, h1, h2); err != nil {
		t.Fatalf("CheckChain(full, inc1, inc2) = %v", err)
	}
	// an incremental whose header says the archive it continues is of
	// another source than that archive says (a forged or damaged header)
	other := h1
	other.Since = &Since{ArchiveID: h0.ID, Source: "another-server", Databases: h1.Since.Databases}
	h0s := h0
	h0s.Source = "this-server"
	for _, bad := range [][]Header{{h1, h2}, {h0, h2}, {h0, h2, h1}, {h0, h0}, {h0, h1, h1}, {}, {h0s, other}} {
		if err := CheckChain(bad...); !errors.Is(err, ErrChain) {
			t.Errorf("CheckChain(%d archives) = %v, want ErrChain", len(bad), err)
		}
	}
	// the incremental's readers say where they start
	f, _ := os.Open(inc2)
	defer f.Close()
	rd, err := NewReader(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	db, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	if db.Since() != nil {
		t.Errorf("recreated db in inc2 has Since %s, want nil (full)", db.Since())
	}
}

func TestRejectsAndAbort(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, Options{})
	d, _ := w.Database("db")
	good := doc("ok", "1-a", false, `{"_id":"ok","_rev":"1-a"}`)
	stub := doc("stub", "1-a", false, `{"_id":"stub","_rev":"1-a"}`, &replicate.Attachment{Name: "f", Stub: true, Digest: "md5-x"})
	wrong := doc("wrong", "1-a", false, `{"_id":"wrong","_rev":"1-a"}`, att("f", "text/plain", "", []byte("abc"), 3, 1))
	wrong.Atts[0].Data = []byte("abd")
	badBody := doc("body", "1-a", false, `{"_id":"body",`)
	rej, err := d.WriteDocs(ctx, []*replicate.Doc{good, stub, wrong, badBody})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"stub": "attachment_missing", "wrong": "digest_mismatch", "body": "bad_request"}
	if len(rej) != len(want) {
		t.Fatalf("rejected %v", rej)
	}
	for _, r := range rej {
		if want[r.ID] != r.Error {
			t.Errorf("%s rejected with %s, want %s", r.ID, r.Error, want[r.ID])
		}
	}
	if err := d.Abort("source went away"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, dbs := readArchive(t, buf.Bytes())
	r := dbs["db"]
	if len(r.docs) != 1 || r.summary.Error != "source went away" {
		t.Fatalf("got %d docs, summary %+v", len(r.docs), r.summary)
	}
}

func TestCloseWithOpenDatabase(t *testing.T) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, Options{})
	if _, err := w.Database("x"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Database("x"); err == nil {
		t.Error("second Database(x) succeeded")
	}
	if err := w.Close(); err == nil {
		t.Error("Close with an open database succeeded")
	}
}

// A restore that stopped can resume from the seq it checkpointed.
func TestChangesSince(t *testing.T) {
	docs := sampleDocs()
	data := writeArchive(t, Options{ChunkSize: 200}, map[string][]*replicate.Doc{"db": docs}, []string{"db"})
	_, all := readArchive(t, data)
	changes := all["db"].changes
	mid := changes[len(changes)/2]
	rd, _ := NewReader(bytes.NewReader(data), nil)
	defer rd.Close()
	db, _ := rd.Next()
	var got []replicate.Change
	if err := db.Changes(context.Background(), mid.Seq, func(c replicate.Change) error { got = append(got, c); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := changes[len(changes)/2+1:]; len(got) != len(want) || got[0].ID != want[0].ID {
		t.Fatalf("since %s: got %d changes, want %d", mid.Seq, len(got), len(want))
	}
	if err := db.Changes(context.Background(), nil, func(replicate.Change) error { return nil }); err == nil {
		t.Error("second Changes call succeeded")
	}
}

// Databases spooled while another one owns the stream drop blobs the
// owner wrote meanwhile, so each blob is stored once.
func TestSpoolDedupe(t *testing.T) {
	ctx := context.Background()
	blob := []byte("same bytes in both databases")
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, Options{TempDir: t.TempDir(), Version: 2})
	a, _ := w.Database("a") // owns the stream
	b, _ := w.Database("b") // spools
	mk := func(id string) []*replicate.Doc {
		return []*replicate.Doc{doc(id, "1-a", false, `{"_id":"`+id+`","_rev":"1-a"}`, att("f", "text/plain", "", blob, int64(len(blob)), 1))}
	}
	if _, err := b.WriteDocs(ctx, mk("inb")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteDocs(ctx, mk("ina")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil { // queued behind a
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(bytes.NewReader(buf.Bytes()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Databases) != 2 || rep.Databases[0].Name != "a" || rep.Databases[0].Blobs != 1 || rep.Databases[1].Blobs != 0 {
		t.Fatalf("databases %+v", rep.Databases)
	}
	_, dbs := readArchive(t, buf.Bytes())
	if !bytes.Equal(dbs["b"].docs[0].Atts[0].Data, blob) {
		t.Fatal("b's attachment lost")
	}
}

// Blobs beyond the memory budget are spilled to disk and read back.
func TestBlobSpill(t *testing.T) {
	data := writeArchive(t, Options{}, map[string][]*replicate.Doc{"db": sampleDocs()}, []string{"db"})
	_, dbs, err := tryRead(data, &ReaderOptions{BlobMemory: -1, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	equalDocs(t, "db", dbs["db"].docs, sampleDocs())
}

// readSinceFile is ReadSince of the archive file at path.
func readSinceFile(t *testing.T, path string) (*Since, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return ReadSince(f)
}
