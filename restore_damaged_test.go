package sofa_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/storage"
)

// damagedArchive is a sound archive's bytes and where its parts lie.
type damagedArchive struct {
	data  []byte
	order []string // databases in archive order
	// index is the span of the index member's stored bytes; footer the
	// offset of the footer's content
	index  [2]int64
	footer int64
}

// chunkAt returns the offset of the stored bytes of db's first doc
// chunk.
func (a *damagedArchive) chunkAt(t *testing.T, db string) int64 {
	t.Helper()
	cr := &countReader{r: bytes.NewReader(a.data)}
	tr := tar.NewReader(cr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no doc chunk of %s: %v", db, err)
		}
		if strings.HasPrefix(h.Name, "db/"+db+"/docs-") || strings.HasPrefix(h.Name, "db/"+db+"/pack-") {
			return cr.n // tar reads a header exactly, no read-ahead
		}
	}
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// flipped returns a copy of data with the byte at each offset changed.
func flipped(data []byte, at ...int64) []byte {
	out := slices.Clone(data)
	for _, i := range at {
		out[i] ^= 0x01
	}
	return out
}

// TestRestore_DamagedArchive: an archive whose index or footer is
// damaged, or cut short before them, is restored in order, from a file
// as from stdin: every whole group before the damage is restored (equal
// to the source), the group the damage is in fails, the run fails with
// one line naming the damaged member, and the databases after the damage
// are listed not started (named from the manifest, read past the damage)
// or, where the manifest cannot be reached (cut short), not counted and
// the summary's total told unknown.
func TestRestore_DamagedArchive(t *testing.T) {
	ctx := t.Context()
	srv := couchtest.Start(t)
	names := manyDBs(t, srv, 8)
	path := filepath.Join(t.TempDir(), "all.sofa")
	backupAll(t, srv, storage.Local{}, path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a := &damagedArchive{data: data, footer: int64(len(data)) - 1536}
	toc, err := archive.ReadTOC(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range toc.Databases {
		a.order = append(a.order, d.Summary.Name)
	}
	var f struct {
		Offset int64 `json:"index_offset"`
		Size   int64 `json:"index_size"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(data[a.footer:a.footer+512]), &f); err != nil {
		t.Fatal(err)
	}
	a.index = [2]int64{f.Offset, f.Offset + f.Size}
	const k = 3 // the group the damage is in, in archive order
	chunk := a.chunkAt(t, a.order[k])

	tgt := couchtest.Start(t)
	dst, err := sofa.Open(ctx, tgt.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for n, c := range []struct {
		name    string
		data    []byte
		stdin   bool   // read in order: stdin
		member  string // the error names it
		want    error
		whole   int  // groups restored before the damage
		unknown bool // the databases after it cannot be known
	}{
		{"file cut short", data[:chunk+10], false, "db/" + a.order[k] + "/pack-", archive.ErrTruncated, k, true},
		{"damaged footer", flipped(data, a.footer+40), false, "footer.json", archive.ErrChecksum, len(names), false},
		{"damaged index", flipped(data, (a.index[0]+a.index[1])/2), false, "index.json.gz", archive.ErrChecksum, len(names), false},
		{"damaged index and group", flipped(data, (a.index[0]+a.index[1])/2, chunk+10), false, "db/" + a.order[k] + "/pack-", archive.ErrChecksum, k, false},
		{"stdin cut short", data[:chunk+10], true, "db/" + a.order[k] + "/pack-", archive.ErrTruncated, k, true},
		{"stdin damaged group", flipped(data, chunk+10), true, "db/" + a.order[k] + "/pack-", archive.ErrChecksum, k, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ar := damagedEndpoint(t, c.data, c.stdin)
			prefix := fmt.Sprintf("c%d-", n)
			renames := map[string]string{}
			for _, name := range names {
				renames[name] = prefix + name
			}
			sum, err := sofa.Restore(ctx, []*sofa.Endpoint{ar}, dst, sofa.RestoreOptions{Renames: renames})
			if err == nil || !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.member) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("restore: %v; want one line naming %s, %v", err, c.member, c.want)
			}
			if sum == nil {
				t.Fatal("no summary")
			}
			byName := map[string]fleet.DBResult{}
			for _, d := range sum.DBs {
				byName[d.Name] = d
			}
			for i, name := range a.order {
				r, ok := byName[prefix+name]
				switch {
				case i < c.whole:
					if r.Status != fleet.StatusOK {
						t.Errorf("%s (group %d, before the damage): %s %s, want ok", name, i, r.Status, r.Error)
					}
					couchtest.AssertEqual(t, srv.DBURL(name), tgt.DBURL(prefix+name))
				case i == c.whole:
					if r.Status != fleet.StatusFailed {
						t.Errorf("%s (the damaged group): %s %s, want failed", name, r.Status, r.Error)
					}
				case c.unknown:
					if ok {
						t.Errorf("%s (after the damage, the manifest never reached): listed %s", name, r.Status)
					}
				default:
					if r.Status != fleet.StatusNotStarted {
						t.Errorf("%s (after the damage): %s %s, want not_started", name, r.Status, r.Error)
					}
				}
			}
			wantTotal, notStarted := len(names), len(names)-c.whole-1
			if c.whole == len(names) {
				notStarted = 0
			}
			if c.unknown {
				wantTotal, notStarted = c.whole+1, 0
			}
			if sum.TotalUnknown != c.unknown || sum.DBsTotal != wantTotal || sum.DBsOK != c.whole || sum.DBsNotStarted != notStarted {
				t.Errorf("summary: %d databases (total unknown: %v), %d ok, %d not started; want %d (%v), %d ok, %d not started",
					sum.DBsTotal, sum.TotalUnknown, sum.DBsOK, sum.DBsNotStarted, wantTotal, c.unknown, c.whole, notStarted)
			}
		})
	}
}

// damagedEndpoint holds data as an archive file, or as stdin ("-")
// when stdin.
func damagedEndpoint(t *testing.T, data []byte, stdin bool) *sofa.Endpoint {
	t.Helper()
	ctx := t.Context()
	if stdin {
		ar, err := sofa.Open(ctx, storage.Stdio, sofa.OpenOptions{Store: storage.Local{Stdin: bytes.NewReader(data)}})
		if err != nil {
			t.Fatal(err)
		}
		return ar
	}
	name := filepath.Join(t.TempDir(), "damaged.sofa")
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
	ar, err := sofa.Open(ctx, name, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ar
}

// TestRestore_ManifestListsMissingGroup: an archive whose manifest lists
// a database it holds no group of (its members taken out) fails the
// restore on the manifest, and that database is listed not started
// because the archive lacks it, not because the restore stopped before
// it.
func TestRestore_ManifestListsMissingGroup(t *testing.T) {
	ctx := t.Context()
	srv := couchtest.Start(t)
	manyDBs(t, srv, 3)
	path := filepath.Join(t.TempDir(), "all.sofa")
	backupAll(t, srv, storage.Local{}, path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	toc, err := archive.ReadTOC(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	gone := toc.Databases[1].Summary
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
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(h.Name, "db/"+gone.Dir+"/") {
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	dst := openAt(t, couchtest.StartKind(t, srv.Kind).URL, nil)
	sum, err := sofa.Restore(ctx, []*sofa.Endpoint{damagedEndpoint(t, out.Bytes(), false)}, dst, sofa.RestoreOptions{})
	if !errors.Is(err, archive.ErrManifest) || sum == nil {
		t.Fatalf("restore: %v; want a manifest mismatch", err)
	}
	listed := false
	for _, r := range sum.DBs {
		if r.Name != gone.Name {
			continue
		}
		listed = true
		if r.Status != fleet.StatusNotStarted || !strings.Contains(r.Error, "holds no group of it") {
			t.Errorf("%s: %s %q; want not started, the archive holding no group of it", r.Name, r.Status, r.Error)
		}
	}
	if !listed {
		t.Errorf("%s, which the manifest lists, is not in the summary: %+v", gone.Name, sum.DBs)
	}
}
