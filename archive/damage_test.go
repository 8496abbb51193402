package archive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sofadb/sofa/replicate"
)

// goodArchive is a small archive with two databases, several chunks and
// attachments.
func goodArchive(t testing.TB) []byte {
	dbs := map[string][]*replicate.Doc{"alpha": sampleDocs(), "beta": sampleDocs()}
	return writeArchive(t, Options{ChunkSize: 400, Version: 2}, dbs, []string{"alpha", "beta"})
}

// rewrite copies an archive member by member; edit may drop a member
// (return false) or change its header and body.
func rewrite(t testing.TB, data []byte, edit func(h *tar.Header, body []byte) (bool, []byte)) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		keep, nb := edit(h, body)
		if !keep {
			continue
		}
		h.Size = int64(len(nb))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(nb)
	}
	tw.Close()
	return out.Bytes()
}

// sealed sets a member's PAX checksums to match body, as a forger would.
func sealed(h *tar.Header, stored, raw []byte) {
	s, rs := sha256.Sum256(stored), sha256.Sum256(raw)
	h.PAXRecords[paxSHA256] = hex.EncodeToString(s[:])
	h.PAXRecords[paxRawSHA256] = hex.EncodeToString(rs[:])
	h.PAXRecords[paxRawSize] = strconv.Itoa(len(raw))
}

// mustFail reads data fully and checks the error: errors.Is sentinel and
// the message names member.
func mustFail(t *testing.T, data []byte, sentinel error, member string) {
	t.Helper()
	_, _, err := tryRead(data, nil)
	if err == nil {
		t.Fatalf("read succeeded, want %v", sentinel)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %q is not %v", err, sentinel)
	}
	if member != "" && !strings.Contains(err.Error(), strconv.Quote(member)) {
		t.Fatalf("error %q does not name %q", err, member)
	}
	if _, verr := Verify(bytes.NewReader(data), nil); !errors.Is(verr, sentinel) {
		t.Fatalf("Verify error %v is not %v", verr, sentinel)
	}
}

func TestTruncated(t *testing.T) {
	data := goodArchive(t)
	// every cut before the end of the manifest fails; none is silent
	manifestEnd := memberOffset(t, data, manifestName) + 100
	for cut := 0; cut < manifestEnd; cut += 97 {
		_, _, err := tryRead(data[:cut], nil)
		if err == nil {
			t.Fatalf("archive cut at %d of %d read without error", cut, len(data))
		}
		if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrFormat) {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	// a cut inside a member names it
	first := memberOffset(t, data, "db/alpha/docs-000001.ndjson.zst")
	mustFail(t, data[:first+10], ErrTruncated, "db/alpha/docs-000001.ndjson.zst")
}

// memberOffset returns the offset of a member's stored bytes in data.
func memberOffset(t testing.TB, data []byte, name string) int {
	t.Helper()
	cr := &countReader{r: bytes.NewReader(data)}
	tr := tar.NewReader(cr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("member %s not found: %v", name, err)
		}
		if h.Name == name {
			return int(cr.n) // tar reads headers exactly, no read-ahead
		}
	}
}

func TestFlippedByte(t *testing.T) {
	data := goodArchive(t)
	t.Run("compressed data", func(t *testing.T) {
		name := "db/beta/docs-000002.ndjson.zst"
		bad := bytes.Clone(data)
		bad[memberOffset(t, data, name)+5] ^= 0x40
		mustFail(t, bad, ErrChecksum, name)
	})
	t.Run("blob", func(t *testing.T) {
		var name string
		tr := tar.NewReader(bytes.NewReader(data))
		for h, err := tr.Next(); err == nil; h, err = tr.Next() {
			if strings.HasPrefix(h.Name, blobPrefix) && h.Size > 10 {
				name = h.Name
				break
			}
		}
		bad := bytes.Clone(data)
		bad[memberOffset(t, data, name)+3] ^= 1
		mustFail(t, bad, ErrChecksum, name)
	})
	t.Run("tar header", func(t *testing.T) {
		// the ustar name field of a chunk's header
		name := "db/alpha/docs-000002.ndjson.zst"
		var before string // the error names the member before the bad header
		tr := tar.NewReader(bytes.NewReader(data))
		for h, err := tr.Next(); err == nil && h.Name != name; h, err = tr.Next() {
			before = h.Name
		}
		i := bytes.Index(data, []byte(name+"\x00"))
		bad := bytes.Clone(data)
		bad[i+3] ^= 1
		mustFail(t, bad, ErrFormat, before)
	})
	t.Run("pax checksum record", func(t *testing.T) {
		// the PAX block before a member holds its SOFA.sha256 record
		name := "db/alpha/docs-000002.ndjson.zst"
		off := memberOffset(t, data, name)
		pax := bytes.LastIndex(data[:off], []byte(paxSHA256+"="))
		bad := bytes.Clone(data)
		c := &bad[pax+len(paxSHA256)+1]
		if *c == 'a' {
			*c = 'b'
		} else {
			*c = 'a'
		}
		mustFail(t, bad, ErrChecksum, name)
	})
	t.Run("manifest", func(t *testing.T) {
		off := memberOffset(t, data, manifestName)
		bad := bytes.Clone(data)
		bad[off+20] ^= 2
		mustFail(t, bad, ErrChecksum, manifestName)
	})
	t.Run("manifest raw records", func(t *testing.T) {
		// an uncompressed member's raw size and SHA-256 are its stored
		// ones: a flipped digit in either is found, though the stored
		// bytes still match their own checksum
		off := memberOffset(t, data, manifestName)
		for _, key := range []string{paxRawSize, paxRawSHA256} {
			i := bytes.LastIndex(data[:off], []byte(key+"="))
			bad := bytes.Clone(data)
			c := &bad[i+len(key)+1]
			if *c == '1' {
				*c = '2'
			} else {
				*c = '1'
			}
			mustFail(t, bad, ErrChecksum, manifestName)
		}
	})
	t.Run("every byte", func(t *testing.T) {
		// a flipped byte anywhere either fails the read or changes
		// nothing that is read (tar padding, slack in header fields)
		_, good, _ := tryRead(data, nil)
		want := digestRead(good)
		for i := 0; i < len(data); i += 11 {
			bad := bytes.Clone(data)
			bad[i] ^= 0x10
			_, got, err := tryRead(bad, nil)
			if err == nil && digestRead(got) != want {
				t.Fatalf("flip at %d of %d changed what was read without an error", i, len(data))
			}
		}
	})
}

// digestRead hashes everything a read delivered.
func digestRead(dbs map[string]*readDB) string {
	h := sha256.New()
	names := make([]string, 0, len(dbs))
	for n := range dbs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		r := dbs[n]
		fmt.Fprintf(h, "%q %+v %+v %+v\n", n, r.summary, r.meta, r.info)
		for _, c := range r.changes {
			fmt.Fprintf(h, "%s %q %v %v\n", c.Seq, c.ID, c.Revs, c.Deleted)
			for _, d := range c.Docs {
				fmt.Fprintf(h, "%q %s %v %v %q\n", d.ID, d.Rev, d.Deleted, d.Revisions, d.Body)
				for _, a := range d.Atts {
					fmt.Fprintf(h, "%+v\n", *a)
				}
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestUnknownVersion(t *testing.T) {
	data := rewrite(t, goodArchive(t), func(h *tar.Header, body []byte) (bool, []byte) {
		if h.Name == headerName {
			nb := bytes.Replace(body, []byte(`"version": 2`), []byte(fmt.Sprintf(`"version": %d`, FormatVersion+1)), 1)
			if bytes.Equal(nb, body) {
				t.Fatal("header has no version to rewrite")
			}
			sealed(h, nb, nb)
			return true, nb
		}
		return true, body
	})
	_, err := NewReader(bytes.NewReader(data), nil)
	if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), `"header.json"`) {
		t.Fatalf("got %v, want ErrVersion naming header.json", err)
	}
}

func TestUnsafeNames(t *testing.T) {
	for _, name := range []string{
		"../evil", "db/../../etc/passwd", "/etc/passwd", "db/a/../b/meta.json", "db/x/../../meta.json",
		"blob/zz", "db/A B/meta.json", "db/x/docs-1.ndjson", "other.json", "db/x/sub/meta.json", "db/.x/meta.json",
	} {
		t.Run(name, func(t *testing.T) {
			data := rewrite(t, goodArchive(t), func(h *tar.Header, body []byte) (bool, []byte) {
				if h.Name == "db/alpha/docs-000001.ndjson.zst" {
					h.Name = name
				}
				return true, body
			})
			mustFail(t, data, ErrUnsafeName, name)
		})
	}
	t.Run("symlink", func(t *testing.T) {
		data := rewrite(t, goodArchive(t), func(h *tar.Header, body []byte) (bool, []byte) {
			if h.Name == "db/alpha/docs-000001.ndjson.zst" {
				h.Typeflag, h.Linkname = tar.TypeSymlink, "/etc/passwd"
				return true, nil
			}
			return true, body
		})
		mustFail(t, data, ErrFormat, "db/alpha/docs-000001.ndjson.zst")
	})
}

func TestMissingBlob(t *testing.T) {
	data := rewrite(t, goodArchive(t), func(h *tar.Header, body []byte) (bool, []byte) {
		return !strings.HasPrefix(h.Name, blobPrefix), body
	})
	_, _, err := tryRead(data, nil)
	if !errors.Is(err, ErrMissingBlob) || !strings.Contains(err.Error(), `"db/alpha/docs-`) {
		t.Fatalf("got %v, want ErrMissingBlob naming a chunk of alpha", err)
	}
}

func TestDroppedMemberFailsManifest(t *testing.T) {
	// drop a whole database group: every member checks out on its own,
	// only the manifest can tell
	data := rewrite(t, goodArchive(t), func(h *tar.Header, body []byte) (bool, []byte) {
		return !strings.HasPrefix(h.Name, "db/beta/"), body
	})
	mustFail(t, data, ErrManifest, manifestName)
}

// bomb returns a zstd stream of n MiB of zeros, a few hundred bytes per
// 8 MiB frame.
func bomb(t testing.TB, mib int) []byte {
	e, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	frame := e.EncodeAll(make([]byte, 8<<20), nil)
	return bytes.Repeat(frame, mib/8)
}

func TestDecompressionBomb(t *testing.T) {
	stored := bomb(t, 4096) // 4 GiB of zeros
	name := "db/alpha/docs-000001.ndjson.zst"
	for _, tc := range []struct {
		label    string
		declared int64
		sentinel error
	}{
		{"declared small", 1000, ErrTooLarge},
		{"declared huge", 8 << 30, ErrTooLarge},    // beyond the reader's cap
		{"declared at cap", 64 << 20, ErrTooLarge}, // decodes 64 MiB, then stops
	} {
		t.Run(tc.label, func(t *testing.T) {
			data := rewrite(t, goodArchive(t), func(h *tar.Header, body []byte) (bool, []byte) {
				if h.Name == name {
					sealed(h, stored, nil)
					h.PAXRecords[paxRawSize] = strconv.FormatInt(tc.declared, 10)
					return true, stored
				}
				return true, body
			})
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, _, err := tryRead(data, &ReaderOptions{MaxMemberSize: 64 << 20})
			runtime.ReadMemStats(&after)
			if !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), strconv.Quote(name)) {
				t.Fatalf("got %v, want %v naming %s", err, tc.sentinel, name)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 200<<20 {
				t.Errorf("allocated %d MiB while refusing a bomb", grew>>20)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v to refuse a bomb", d)
			}
		})
	}
}

func TestMemberAfterManifest(t *testing.T) {
	data := goodArchive(t)
	// append a member after the manifest: strip the trailer, add one
	body := []byte("{}")
	var extra bytes.Buffer
	tw := tar.NewWriter(&extra)
	h := &tar.Header{Name: headerName, Mode: 0o644, Size: 2, Typeflag: tar.TypeReg, Format: tar.FormatPAX,
		PAXRecords: map[string]string{}}
	sealed(h, body, body)
	tw.WriteHeader(h)
	tw.Write(body)
	tw.Close()
	bad := append(bytes.Clone(data[:len(data)-1024]), extra.Bytes()...)
	mustFail(t, bad, ErrFormat, "")
}

// Bytes after the tar trailer: zeros (a tar writer's padding to its
// record size) are taken; anything else, such as a second archive
// appended (cat a.sofa b.sofa), is refused, never passed over.
func TestBytesAfterTrailer(t *testing.T) {
	good := goodArchive(t)
	padded := append(append([]byte(nil), good...), make([]byte, 10240)...)
	if _, _, err := tryRead(padded, nil); err != nil {
		t.Fatalf("archive padded with zeros: %v", err)
	}
	for name, tail := range map[string][]byte{
		"garbage":          []byte("garbage"),
		"another archive":  good,
		"zeros then bytes": append(make([]byte, 1000), 'x'),
		"too many zeros":   make([]byte, tailLimit+4096),
	} {
		t.Run(name, func(t *testing.T) {
			bad := append(append([]byte(nil), good...), tail...)
			mustFail(t, bad, ErrFormat, "")
			// List too, whose index (read from the end: the second
			// archive's, or none) does not fit, and which then reads the
			// archive in order.
			if _, _, err := List(bytes.NewReader(bad)); !errors.Is(err, ErrFormat) {
				t.Errorf("List: %v, want ErrFormat", err)
			}
		})
	}
	if _, _, err := List(bytes.NewReader(padded)); err != nil {
		t.Errorf("List of an archive padded with zeros: %v", err)
	}
}
