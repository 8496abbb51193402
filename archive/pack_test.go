package archive

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/sofadb/sofa/replicate"
)

// packDocs holds what format version 3 packs and what it does not: small
// attachments that compress and that do not (a PNG), one shared by two
// databases, one too large for a pack, and enough small ones to cut a
// pack on its blob bytes.
func packDocs() map[string][]*replicate.Doc {
	png := append([]byte("\x89PNG\r\n\x1a\n"), randomBytes(9000)...)
	text := bytes.Repeat([]byte("a small text attachment "), 200)
	large := randomBytes(packBlobMax + 1)
	many := []*replicate.Doc{}
	for i := range 20 {
		b := randomBytes(60 << 10)
		many = append(many, doc(fmt.Sprintf("m%02d", i), "1-m", false, fmt.Sprintf(`{"i":%d}`, i),
			att("b.bin", "application/octet-stream", "", b, int64(len(b)), 1)))
	}
	return map[string][]*replicate.Doc{
		"plain": sampleDocs(),
		"atts": {
			doc("p", "1-p", false, `{"k":"png"}`, att("flag.png", "image/png", "", png, int64(len(png)), 1)),
			doc("t", "1-t", false, `{"k":"text"}`, att("t.txt", "text/plain", "", text, int64(len(text)), 1)),
			doc("l", "1-l", false, `{"k":"large"}`, att("l.bin", "application/octet-stream", "", large, int64(len(large)), 1)),
		},
		"shares": {doc("s", "1-s", false, `{"k":"same png"}`, att("flag.png", "image/png", "", png, int64(len(png)), 1))},
		"many":   many,
		"empty":  nil,
	}
}

var packOrder = []string{"plain", "atts", "shares", "many", "empty"}

// TestPack_RoundTrip: in format version 3 every database group is packs
// (and blobs too large for them), zstd packs and blobs carry no SOFA
// records, and everything reads back equal: in order, through the index,
// and by scanning the tar headers when the index is damaged.
func TestPack_RoundTrip(t *testing.T) {
	for _, c := range []Compression{Zstd, Gzip, None} {
		t.Run(string(c), func(t *testing.T) {
			dbs := packDocs()
			data := writeArchive(t, Options{Compression: c, ChunkSize: 300}, dbs, packOrder)
			h, got := readArchive(t, data)
			if h.Version != 3 {
				t.Fatalf("version %d", h.Version)
			}
			for _, name := range packOrder {
				equalDocs(t, name, got[name].docs, dbs[name])
			}
			if _, err := Verify(bytes.NewReader(data), nil); err != nil {
				t.Fatal(err)
			}
			packs, blobs := 0, 0
			tr := tar.NewReader(bytes.NewReader(data))
			for {
				th, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				p, err := parseName(th.Name)
				if err != nil {
					t.Fatal(err)
				}
				switch p.kind {
				case kindPack:
					packs++
				case kindBlob:
					blobs++
				case kindMeta, kindChunk, kindEnd:
					t.Errorf("member %s outside a pack", th.Name)
				}
				if _, has := th.PAXRecords[paxSHA256]; has == selfChecking(3, p) {
					t.Errorf("%s: SOFA records %v, want them only where its bytes do not check themselves", th.Name, has)
				}
			}
			// the large blob is a member of its own; "many" cut its packs
			// on blob bytes (20 x 60 KiB) and on records (ChunkSize 300)
			if blobs != 1 || packs < len(packOrder)+2 {
				t.Errorf("%d packs and %d blob members", packs, blobs)
			}
			idx, err := ReadTOC(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range packOrder {
				alone := readIndexed(t, bytes.NewReader(data), idx, func(n string) bool { return n == name })
				equalDocs(t, name, alone[name].docs, dbs[name])
			}
			scanned, err := Scan(bytes.NewReader(data), int64(len(data)), &ReaderOptions{RefetchBlobs: true, BlobMemory: -1})
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range scanned.Groups() {
				db, err := scanned.OpenDB(g)
				if err != nil {
					t.Fatal(err)
				}
				var docs []*replicate.Doc
				if err := db.Changes(t.Context(), nil, func(ch replicate.Change) error { docs = append(docs, ch.Docs...); return nil }); err != nil {
					t.Fatalf("%s: %v", g.Name, err)
				}
				db.Close()
				equalDocs(t, g.Name, docs, dbs[g.Name])
			}
			// with its footer damaged, Scan reads the tar headers (and the
			// packs) in order: it gets to the footer, and says so
			bad := bytes.Clone(data)
			bad[len(bad)-tarTrailer-FooterSize+2] ^= 0x20
			if _, err := Scan(bytes.NewReader(bad), int64(len(bad)), nil); err == nil || !strings.Contains(err.Error(), footerName) {
				t.Fatalf("scan with a damaged footer: %v", err)
			}
		})
	}
}

// TestPack_Smaller: many small databases take far less room in format
// version 3 than in version 2 (seeds/000's shape: one document each).
func TestPack_Smaller(t *testing.T) {
	dbs := map[string][]*replicate.Doc{}
	var order []string
	for i := range 200 {
		name := fmt.Sprintf("db%03d", i)
		dbs[name] = []*replicate.Doc{doc("d", "1-a", false, fmt.Sprintf(`{"_id":"d","_rev":"1-a","n":%d}`, i))}
		order = append(order, name)
	}
	v2 := writeArchive(t, Options{Version: 2}, dbs, order)
	v3 := writeArchive(t, Options{}, dbs, order)
	if ratio := float64(len(v3)) / float64(len(v2)); ratio > 0.4 {
		t.Errorf("version 3 is %d bytes, version 2 %d: %.2f, want at most 0.4", len(v3), len(v2), ratio)
	}
	_, got := readArchive(t, v3)
	for _, name := range order {
		equalDocs(t, name, got[name].docs, dbs[name])
	}
}

// TestPack_StoredBytes: a group's stored_bytes (the manifest's, the
// reader's) are its packs' and blobs' bytes, though its end member, in
// its last pack, cannot say them.
func TestPack_StoredBytes(t *testing.T) {
	data := writeArchive(t, Options{ChunkSize: 300}, packDocs(), packOrder)
	want := map[string]int64{}
	tr := tar.NewReader(bytes.NewReader(data))
	dir := ""
	for {
		th, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		p, _ := parseName(th.Name)
		switch p.kind {
		case kindPack:
			dir = p.dir
			want[p.dir] += th.Size
		case kindBlob:
			want[dir] += th.Size
		}
	}
	_, got := readArchive(t, data)
	for _, name := range packOrder {
		if s := got[name].summary; s.StoredBytes != want[dbDir(name)] || s.StoredBytes == 0 {
			t.Errorf("%s: stored_bytes %d, its members hold %d", name, s.StoredBytes, want[dbDir(name)])
		}
	}
}

// repack rewrites the first pack member of dir: edit changes its tar
// (members in order, as named and held); it is compressed again as a
// writer would, so only what edit did is wrong.
func repack(t *testing.T, data []byte, dir string, edit func(hs []*tar.Header, bodies [][]byte) ([]*tar.Header, [][]byte)) []byte {
	t.Helper()
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	done := false
	return rewrite(t, data, func(h *tar.Header, body []byte) (bool, []byte) {
		p, _ := parseName(h.Name)
		if done || p.kind != kindPack || p.dir != dir {
			return true, body
		}
		done = true
		raw, err := dec.DecodeAll(body, nil)
		if err != nil {
			t.Fatal(err)
		}
		var hs []*tar.Header
		var bodies [][]byte
		tr := tar.NewReader(bytes.NewReader(raw))
		for {
			ih, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			b, _ := io.ReadAll(tr)
			hs, bodies = append(hs, ih), append(bodies, b)
		}
		hs, bodies = edit(hs, bodies)
		var out bytes.Buffer
		tw := tar.NewWriter(&out)
		for i, ih := range hs {
			ih.Size = int64(len(bodies[i]))
			if err := tw.WriteHeader(ih); err != nil {
				t.Fatal(err)
			}
			tw.Write(bodies[i])
		}
		tw.Close()
		return true, enc.EncodeAll(out.Bytes(), nil)
	})
}

// TestPack_Lies: a pack holding what a writer never puts there is
// refused, naming the pack and the member, before anything of it is
// used; so is a damaged pack, wherever the damage is.
func TestPack_Lies(t *testing.T) {
	good := writeArchive(t, Options{}, packDocs(), packOrder)
	packName := "db/atts/pack-000001.tar.zst"
	rename := func(to string) func([]*tar.Header, [][]byte) ([]*tar.Header, [][]byte) {
		return func(hs []*tar.Header, bs [][]byte) ([]*tar.Header, [][]byte) {
			hs[1].Name = to
			return hs, bs
		}
	}
	for _, tc := range []struct {
		label    string
		edit     func([]*tar.Header, [][]byte) ([]*tar.Header, [][]byte)
		sentinel error
	}{
		{"unsafe name", rename("db/atts/../../etc/passwd"), ErrUnsafeName},
		{"member of another database", rename("db/plain/docs-000001.ndjson"), ErrFormat},
		{"member compressed on its own", rename("db/atts/docs-000001.ndjson.zst"), ErrFormat},
		{"header inside", rename("header.json"), ErrFormat},
		{"a symlink", func(hs []*tar.Header, bs [][]byte) ([]*tar.Header, [][]byte) {
			hs[1].Typeflag, hs[1].Linkname, bs[1] = tar.TypeSymlink, "/etc/passwd", nil
			return hs, bs
		}, ErrFormat},
		{"blob bytes changed", func(hs []*tar.Header, bs [][]byte) ([]*tar.Header, [][]byte) {
			for i, h := range hs {
				if strings.HasPrefix(h.Name, blobPrefix) {
					bs[i] = append(bytes.Clone(bs[i][:len(bs[i])-1]), bs[i][len(bs[i])-1]^1)
				}
			}
			return hs, bs
		}, ErrChecksum},
		{"empty", func(hs []*tar.Header, bs [][]byte) ([]*tar.Header, [][]byte) { return nil, nil }, ErrFormat},
	} {
		t.Run(tc.label, func(t *testing.T) {
			bad := repack(t, good, "atts", tc.edit)
			_, _, err := tryRead(bad, nil)
			if !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), packName) {
				t.Fatalf("got %v, want %v naming %s", err, tc.sentinel, packName)
			}
		})
	}
	// every byte of a pack's stored bytes matters: flipped, the read fails
	at := memberOffset(t, good, packName)
	end := at + 2000
	for i := at; i < end && i < len(good); i += 7 {
		bad := bytes.Clone(good)
		bad[i] ^= 0x20
		if _, _, err := tryRead(bad, nil); err == nil {
			t.Fatalf("byte %d of %s flipped: read succeeded", i-at, packName)
		}
	}
	for _, cut := range []int{at + 10, at + 500, len(good) / 2} {
		if _, _, err := tryRead(good[:cut], nil); !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrFormat) && !errors.Is(err, ErrChecksum) {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
}

// TestPack_Bomb: a pack decompressing to more than the reader's limit is
// refused, whatever its frames declare, without taking that memory.
func TestPack_Bomb(t *testing.T) {
	good := writeArchive(t, Options{}, packDocs(), packOrder)
	stored := bomb(t, 512) // 512 MiB of zeros in frames declaring their size
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	undeclared := enc.EncodeAll(make([]byte, 10), nil) // too small for klauspost to write its size
	var streamed bytes.Buffer                          // frames of a stream: their size undeclared
	zw, _ := zstd.NewWriter(&streamed, zstd.WithEncoderCRC(true))
	zw.Write(make([]byte, 200<<20))
	zw.Close()
	for _, tc := range []struct {
		label string
		body  []byte
	}{
		{"declared", stored},
		{"undeclared", streamed.Bytes()},
		{"declared, then a frame that does not say", append(bytes.Clone(stored[:len(stored)/4]), undeclared...)},
	} {
		t.Run(tc.label, func(t *testing.T) {
			bad := rewrite(t, good, func(h *tar.Header, body []byte) (bool, []byte) {
				if h.Name == "db/atts/pack-000001.tar.zst" {
					return true, tc.body
				}
				return true, body
			})
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, _, err := tryRead(bad, &ReaderOptions{MaxMemberSize: 64 << 20})
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("got %v, want %v", err, ErrTooLarge)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 100<<20 {
				t.Errorf("allocated %d MiB while refusing a bomb (the limit is 64 MiB)", grew>>20)
			}
		})
	}
}

// TestWriterVersions: a writer writes format versions 2 and 3 only.
func TestWriterVersions(t *testing.T) {
	for _, v := range []int{1, 4, -1} {
		if _, err := NewWriter(io.Discard, Options{Version: v}); err == nil {
			t.Errorf("version %d accepted", v)
		}
	}
	for _, v := range []int{0, 2, 3} {
		w, err := NewWriter(io.Discard, Options{Version: v})
		if err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		if want := max(v, 2); w.Header().Version != want && !(v == 0 && w.Header().Version == FormatVersion) {
			t.Errorf("version %d wrote %d", v, w.Header().Version)
		}
	}
}

// TestPack_ManifestCompressed: format version 3's manifest is
// manifest.json.zst; a byte of it changed is found by the in-order read,
// by List and by the index's check.
func TestPack_ManifestCompressed(t *testing.T) {
	good := writeArchive(t, Options{}, packDocs(), packOrder)
	names := memberNames(t, good)
	if !strings.Contains(strings.Join(names, " "), manifestName+".zst") {
		t.Fatalf("members %v: no %s.zst", names, manifestName)
	}
	at := memberOffset(t, good, manifestName+".zst")
	for _, off := range []int{5, 40, 200} {
		bad := bytes.Clone(good)
		bad[at+off] ^= 0x10
		if _, _, err := tryRead(bad, nil); !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), manifestName) {
			t.Errorf("byte %d of the manifest changed: read gave %v, want %v naming it", off, err, ErrChecksum)
		}
		if _, err := Verify(bytes.NewReader(bad), nil); err == nil {
			t.Errorf("byte %d of the manifest changed: Verify passed", off)
		}
		idx, err := ReadTOC(bytes.NewReader(bad), int64(len(bad)))
		if err != nil {
			t.Fatal(err)
		}
		if err := idx.CheckManifest(bytes.NewReader(bad), nil); !errors.Is(err, ErrChecksum) {
			t.Errorf("byte %d of the manifest changed: CheckManifest gave %v", off, err)
		}
	}
}
