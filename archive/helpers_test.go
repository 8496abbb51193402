package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

// att builds an attachment whose digest matches data.
func att(name, ctype, encoding string, data []byte, length int64, revpos int) *replicate.Attachment {
	m := md5.Sum(data)
	a := &replicate.Attachment{Name: name, ContentType: ctype, Digest: "md5-" + base64.StdEncoding.EncodeToString(m[:]),
		Length: length, Encoding: encoding, RevPos: revpos, Data: data}
	if encoding != "" {
		a.EncodedLength = int64(len(data))
	}
	return a
}

// doc builds a revision; body is used verbatim.
func doc(id, rev string, deleted bool, body string, atts ...*replicate.Attachment) *replicate.Doc {
	gen := replicate.Generation(rev)
	hash := rev[len(fmt.Sprint(gen))+1:]
	return &replicate.Doc{ID: id, Rev: rev, Deleted: deleted, Body: []byte(body),
		Revisions: replicate.Revisions{Start: gen, IDs: []string{hash, "parent" + hash}}, Atts: atts}
}

// writeArchive writes dbs (name -> revisions) sequentially into a new
// archive and returns its bytes.
func writeArchive(t testing.TB, opts Options, dbs map[string][]*replicate.Doc, order []string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range order {
		d, err := w.Database(name)
		if err != nil {
			t.Fatal(err)
		}
		d.SetSourceInfo(replicate.DBInfo{Name: name, DocCount: int64(len(dbs[name])), InstanceStart: "1700000000"})
		if err := d.SetMetadata(ctx, replicate.Metadata{Security: []byte(`{"admins":{"names":["a"]}}`), RevsLimit: 1000}, replicate.BeforeDocs); err != nil {
			t.Fatal(err)
		}
		rej, err := d.WriteDocs(ctx, dbs[name])
		if err != nil || len(rej) > 0 {
			t.Fatalf("WriteDocs(%q) = %v, %v", name, rej, err)
		}
		if err := d.PutLocal(ctx, "_local/rep1", []byte(`{"session_id":"s","source_last_seq":"42-abc","history":[]}`)); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type readDB struct {
	summary DBSummary
	meta    replicate.Metadata
	info    replicate.DBInfo
	changes []replicate.Change
	docs    []*replicate.Doc
}

// readArchive reads every database and every change; it fails the test on
// any error.
func readArchive(t testing.TB, data []byte) (Header, map[string]*readDB) {
	t.Helper()
	h, dbs, err := tryRead(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h, dbs
}

func tryRead(data []byte, opts *ReaderOptions) (Header, map[string]*readDB, error) {
	rd, err := NewReader(bytes.NewReader(data), opts)
	if err != nil {
		return Header{}, nil, err
	}
	defer rd.Close()
	out := map[string]*readDB{}
	ctx := context.Background()
	for {
		db, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return rd.Header(), out, nil
		}
		if err != nil {
			return rd.Header(), out, err
		}
		r := &readDB{}
		r.info, _ = db.Info(ctx)
		err = db.Changes(ctx, nil, func(c replicate.Change) error {
			r.changes = append(r.changes, c)
			r.docs = append(r.docs, c.Docs...)
			return nil
		})
		if err != nil {
			return rd.Header(), out, err
		}
		r.summary, _ = db.Summary()
		r.meta, _ = db.Metadata(ctx)
		out[db.Name()] = r
	}
}

// equalDocs compares revisions field by field, bodies and attachment bytes
// byte for byte.
func equalDocs(t testing.TB, db string, got, want []*replicate.Doc) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d revisions, want %d", db, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Rev != w.Rev || g.Deleted != w.Deleted {
			t.Fatalf("%s: revision %d: got %q %s deleted=%v, want %q %s deleted=%v", db, i, g.ID, g.Rev, g.Deleted, w.ID, w.Rev, w.Deleted)
		}
		if !bytes.Equal(g.Body, bytes.TrimSpace(w.Body)) {
			t.Fatalf("%s: %q %s: body\n got %q\nwant %q", db, w.ID, w.Rev, g.Body, w.Body)
		}
		if fmt.Sprint(g.Revisions) != fmt.Sprint(w.Revisions) {
			t.Fatalf("%s: %q: revisions %v, want %v", db, w.ID, g.Revisions, w.Revisions)
		}
		if len(g.Atts) != len(w.Atts) {
			t.Fatalf("%s: %q: %d attachments, want %d", db, w.ID, len(g.Atts), len(w.Atts))
		}
		for j := range w.Atts {
			ga, wa := *g.Atts[j], *w.Atts[j]
			if !bytes.Equal(ga.Data, wa.Data) {
				t.Fatalf("%s: %q attachment %q: bytes differ", db, w.ID, wa.Name)
			}
			ga.Data, wa.Data = nil, nil
			if fmt.Sprintf("%+v", ga) != fmt.Sprintf("%+v", wa) {
				t.Fatalf("%s: %q attachment: got %+v, want %+v", db, w.ID, ga, wa)
			}
		}
	}
}

// memberNames lists an archive's tar member names in stream order.
func memberNames(t testing.TB, data []byte) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h.Name)
	}
}
