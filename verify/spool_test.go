package verify_test

import (
	"bytes"
	"testing"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/verify"
)

// backupToMemory writes database a of p into an in-memory archive.
func backupToMemory(t *testing.T, p *pairDB) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, archive.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dbw, err := w.Database(p.a)
	if err != nil {
		t.Fatal(err)
	}
	info, err := p.adb.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dbw.SetSourceInfo(info)
	if _, err := replicate.Run(t.Context(), p.adb, dbw, replicate.Options{SourceReadOnly: true, BatchSize: 2}); err != nil {
		t.Fatal(err)
	}
	if err := dbw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

func compareArchive(t *testing.T, buf []byte, b replicate.Source) *verify.Report {
	t.Helper()
	rd, err := archive.NewReader(bytes.NewReader(buf), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	dbr, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	sp, err := verify.NewSpooled(dbr, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	rep, err := verify.Compare(t.Context(), sp, b, verify.Options{Mode: verify.Full, LenientRevpos: true})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// An archive (whose leaves of one document arrive in separate records,
// here in separate batches) compares equal with its source in full mode,
// and a leaf added on the server shows as the one difference.
func TestSpooled_ArchiveAgainstServer(t *testing.T) {
	p := newPair(t)
	buf := backupToMemory(t, p).Bytes()
	if rep := compareArchive(t, buf, p.adb); !rep.Equal() {
		t.Fatalf("archive differs from its source:\n%s", dump(rep))
	}
	p.load(t, p.a, raw(`{"_id":"extra-leaf","_rev":"1-zz","v":1}`))
	rep := compareArchive(t, buf, p.adb)
	if rep.Equal() || !has(rep, verify.KindExtra, "extra-leaf", "") {
		t.Fatalf("want the new document reported as extra:\n%s", dump(rep))
	}
}
