package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

func sampleDocs() []*replicate.Doc {
	shared := bytes.Repeat([]byte("shared attachment bytes "), 100)
	gz := []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3, 4, 5} // stands in for gzip bytes
	longID := strings.Repeat("x", 20000)
	return []*replicate.Doc{
		doc("plain", "1-aaa", false, `{"_id":"plain","_rev":"1-aaa","n":1}`),
		// a conflict: two leaves of one document
		doc("conflicted", "2-bbb", false, `{"_id":"conflicted","_rev":"2-bbb","side":"left"}`),
		doc("conflicted", "2-ccc", false, `{"_id":"conflicted","_rev":"2-ccc","side":"right"}`),
		// a tombstone that keeps body fields
		doc("gone", "3-ddd", true, `{"_id":"gone","_rev":"3-ddd","_deleted":true,"why":"kept field"}`),
		// body bytes kept as sent: whitespace, newlines, escapes, key order
		doc("ws", "1-eee", false, "{ \"_id\" : \"ws\",\n  \"_rev\":\"1-eee\",\n  \"z\":1, \"a\":\"\\u00e9\\n\" }"),
		doc("../x", "1-fff", false, `{"_id":"../x","_rev":"1-fff"}`),
		doc("a/b", "1-ggg", false, `{"_id":"a/b","_rev":"1-ggg"}`),
		doc("ünïcödé ✓", "1-hhh", false, `{"_id":"ünïcödé ✓","_rev":"1-hhh"}`),
		doc(longID, "1-iii", false, `{"_id":"`+longID+`","_rev":"1-iii"}`),
		doc("att1", "2-jjj", false, `{"_id":"att1","_rev":"2-jjj"}`,
			att("s.txt", "text/plain", "", shared, int64(len(shared)), 1),
			att("g.txt", "text/plain", "gzip", gz, 40, 2),
			att("empty", "application/octet-stream", "", []byte{}, 0, 2)),
		doc("att2", "1-kkk", false, `{"_id":"att2","_rev":"1-kkk"}`,
			att("same.txt", "text/plain", "", shared, int64(len(shared)), 1)),
	}
}

var hostileNames = []string{"plain", "a$b(c)+d/e", "../x", "_users", "unicode-éü", strings.Repeat("long/name$", 24)}

func TestRoundTrip(t *testing.T) {
	for _, c := range []Compression{Zstd, Gzip, None} {
		t.Run(string(c), func(t *testing.T) {
			dbs := map[string][]*replicate.Doc{}
			for _, n := range hostileNames {
				dbs[n] = sampleDocs()
			}
			data := writeArchive(t, Options{Compression: c, ChunkSize: 300, Tool: "sofa test", Version: 2}, dbs, hostileNames)
			h, got := readArchive(t, data)
			if h.Version != 2 || h.Compression != c || h.Tool != "sofa test" || h.Since != nil {
				t.Fatalf("header %+v", h)
			}
			if len(got) != len(hostileNames) {
				t.Fatalf("got %d databases, want %d", len(got), len(hostileNames))
			}
			for _, n := range hostileNames {
				r := got[n]
				if r == nil {
					t.Fatalf("database %q missing", n)
				}
				equalDocs(t, n, r.docs, dbs[n])
				if string(r.summary.Seq) != `"42-abc"` {
					t.Errorf("%q: seq %s", n, r.summary.Seq)
				}
				if r.meta.RevsLimit != 1000 || string(r.meta.Security) != `{"admins":{"names":["a"]}}` {
					t.Errorf("%q: metadata %+v", n, r.meta)
				}
				if r.info.InstanceStart != "1700000000" || r.info.Name != n {
					t.Errorf("%q: info %+v", n, r.info)
				}
				// conflicting leaves of one doc travel in one Change
				for _, ch := range r.changes {
					if ch.ID == "conflicted" && len(ch.Revs) != 2 {
						t.Errorf("%q: conflicted change has revs %v", n, ch.Revs)
					}
					if ch.ID == "gone" && !ch.Deleted {
						t.Errorf("%q: tombstone change not deleted", n)
					}
				}
			}
			// the shared attachment is stored once in the whole archive
			blobs := 0
			tr := tar.NewReader(bytes.NewReader(data))
			for {
				h, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasPrefix(h.Name, blobPrefix) {
					blobs++
				}
				if strings.Contains(h.Name, "..") || strings.HasPrefix(h.Name, "/") {
					t.Fatalf("unsafe member name %q", h.Name)
				}
			}
			if blobs != 3 {
				t.Errorf("archive holds %d blob members, want 3 (shared, gzip, empty)", blobs)
			}
			if _, err := Verify(bytes.NewReader(data), nil); err != nil {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

func TestListAndTarTool(t *testing.T) {
	dbs := map[string][]*replicate.Doc{"one": sampleDocs(), "two": sampleDocs()[:3]}
	data := writeArchive(t, Options{Version: 2}, dbs, []string{"two", "one"})
	h, sums, err := List(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 2 || sums[0].Name != "one" || sums[1].Name != "two" {
		t.Fatalf("List = %+v", sums)
	}
	if got, want := sums[1].Revisions, int64(3); got != want {
		t.Errorf("two: revisions %d, want %d", got, want)
	}
	if sums[0].Tombstones != 1 || sums[0].Attachments != 4 || sums[0].Blobs != 3 || sums[0].StoredBytes == 0 {
		t.Errorf("one: %+v", sums[0])
	}
	if h.ID == "" {
		t.Error("no archive id")
	}
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("no tar tool")
	}
	cmd := exec.Command("tar", "tf", "-")
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output() // GNU tar warns on stderr about the SOFA.* records
	if err != nil {
		t.Fatalf("tar tf: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	// version 2: the manifest, then the index and its footer
	if n := len(lines); lines[0] != headerName || n < 4 || lines[n-3] != manifestName || lines[n-2] != indexName || lines[n-1] != footerName || !strings.Contains(string(out), "db/two/meta.json") {
		t.Errorf("tar tf lists:\n%s", out)
	}
}

// Many databases written at once, each from several goroutines, come back
// whole, each group contiguous, and a blob shared by all is stored once.
func TestConcurrentDatabases(t *testing.T) {
	const ndb, workers, perWorker = 8, 4, 50
	shared := bytes.Repeat([]byte("everyone has this "), 50)
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Options{ChunkSize: 2000, TempDir: t.TempDir(), Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := map[string]map[string]*replicate.Doc{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range ndb {
		name := fmt.Sprintf("db%d", i)
		mu.Lock() // earlier databases' goroutines are writing into want
		want[name] = map[string]*replicate.Doc{}
		mu.Unlock()
		d, err := w.Database(name)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var inner sync.WaitGroup
			for k := range workers {
				inner.Add(1)
				go func() {
					defer inner.Done()
					for j := range perWorker {
						id := fmt.Sprintf("%s-w%d-%d", name, k, j)
						own := []byte(id + " own bytes")
						dc := doc(id, "1-abc", j%7 == 0, `{"_id":"`+id+`","_rev":"1-abc","k":`+fmt.Sprint(j)+`}`,
							att("shared", "text/plain", "", shared, int64(len(shared)), 1),
							att("own", "text/plain", "", own, int64(len(own)), 1))
						mu.Lock()
						want[name][id] = dc
						mu.Unlock()
						if rej, err := d.WriteDocs(ctx, []*replicate.Doc{dc}); err != nil || rej != nil {
							t.Errorf("WriteDocs: %v %v", rej, err)
							return
						}
					}
				}()
			}
			inner.Wait()
			if err := d.Close(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	_, got := readArchive(t, data)
	for name, docs := range want {
		r := got[name]
		if r == nil || len(r.docs) != len(docs) {
			t.Fatalf("%s: got %v docs, want %d", name, r, len(docs))
		}
		for _, g := range r.docs {
			equalDocs(t, name, []*replicate.Doc{g}, []*replicate.Doc{docs[g.ID]})
		}
	}
	// groups are contiguous and the shared blob appears once
	tr := tar.NewReader(bytes.NewReader(data))
	var cur string
	done := map[string]bool{}
	blobs := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p, err := parseName(h.Name)
		if err != nil {
			t.Fatal(err)
		}
		switch p.kind {
		case kindBlob:
			blobs++
		case kindMeta:
			if cur != "" || done[p.dir] {
				t.Fatalf("group %s starts inside %s", p.dir, cur)
			}
			cur = p.dir
		case kindChunk, kindEnd:
			if p.dir != cur {
				t.Fatalf("member %s inside group %s", h.Name, cur)
			}
			if p.kind == kindEnd {
				done[cur], cur = true, ""
			}
		}
	}
	if want := 1 + ndb*workers*perWorker; blobs != want {
		t.Errorf("%d blob members, want %d", blobs, want)
	}
	if _, err := Verify(bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}
}
