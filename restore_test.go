package sofa_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/recproxy"
	"github.com/sofadb/sofa/storage"
)

// manyDBs creates n databases of one to three documents each on srv
// (names "db-000"...) and returns their names.
func manyDBs(t *testing.T, srv *couchtest.Server, n int) []string {
	t.Helper()
	ctx := t.Context()
	c := srv.Client()
	names := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		names[i] = fmt.Sprintf("db-%03d", i)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := c.CreateDB(ctx, names[i]); err != nil {
				errs <- err
				return
			}
			var docs []json.RawMessage
			for j := range 1 + i%3 {
				docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"d%d","n":%d}`, j, i)))
			}
			if _, err := c.BulkDocs(ctx, names[i], true, docs...); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return names
}

// backupAll backs up the databases named db-* of srv into the archive
// name of st.
func backupAll(t *testing.T, srv *couchtest.Server, st storage.Store, name string) *sofa.Endpoint {
	t.Helper()
	ctx := t.Context()
	src, err := sofa.Open(ctx, srv.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := sofa.Open(ctx, name, sofa.OpenOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := sofa.Backup(ctx, src, ar, sofa.BackupOptions{Selection: sofa.Selection{Include: []string{"db-*"}}})
	if err != nil || !sum.Complete() {
		t.Fatalf("backup: %+v, %v", sum, err)
	}
	return ar
}

// createdDBs are the PUT /db requests of a recording (database creations).
func createdDBs(p *recproxy.Proxy) []recproxy.Exchange {
	var out []recproxy.Exchange
	for _, e := range p.Filter("PUT", "/db-") {
		if strings.Count(e.Path, "/") == 1 {
			out = append(out, e)
		}
	}
	return out
}

// TestRestore_ParallelWholeServer: a whole-server restore of 200 small
// databases out of an archive file restores several at once (the target
// sees more than one database created, and more than one _bulk_docs, at
// the same time) and the copy equals the source; a database that cannot
// be restored (the target holds another one of that name) fails alone,
// the others complete.
func TestRestore_ParallelWholeServer(t *testing.T) {
	ctx := t.Context()
	srv := couchtest.Start(t)
	names := manyDBs(t, srv, 200)
	ar := backupAll(t, srv, storage.Local{}, filepath.Join(t.TempDir(), "all.sofa"))

	tgt := couchtest.Start(t)
	rec := recproxy.Start(t, tgt.URL)
	dst, err := sofa.Open(ctx, rec.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := sofa.Restore(ctx, []*sofa.Endpoint{ar}, dst, sofa.RestoreOptions{})
	if err != nil || !sum.Complete() || sum.DBsTotal != len(names) {
		t.Fatalf("restore: %d of %d ok (%d failed), %v", sum.DBsOK, sum.DBsTotal, sum.DBsFailed, err)
	}
	creates, bulk := createdDBs(rec), rec.Filter("POST", "/_bulk_docs")
	if len(creates) != len(names) {
		t.Errorf("%d databases created, want %d", len(creates), len(names))
	}
	pc, pb := recproxy.MaxInFlight(creates), recproxy.MaxInFlight(bulk)
	t.Logf("at most %d PUT /db and %d _bulk_docs in flight at once (peak databases %d)", pc, pb, sum.Concurrency.Peak)
	if pc < 2 || pb < 2 {
		t.Errorf("databases restored one after the other: at most %d PUT /db and %d _bulk_docs in flight at once", pc, pb)
	}
	// A database created by the restore costs its writes only: no
	// `_local` document is read back (the checkpoint's _rev comes from
	// the answer to its PUT).
	if reads := rec.Filter("GET", "/_local/"); len(reads) > 0 {
		t.Errorf("%d GET of _local documents (first %s), want none", len(reads), reads[0].Path)
	}
	for _, n := range names {
		couchtest.AssertEqual(t, srv.DBURL(n), tgt.DBURL(n))
	}

	// One database fails (the target holds another db-007), the others
	// complete.
	tgt2 := couchtest.Start(t)
	if err := tgt2.Client().CreateDB(ctx, "db-007"); err != nil {
		t.Fatal(err)
	}
	if _, err := tgt2.Client().PutDoc(ctx, "db-007", "other", map[string]any{"x": 1}); err != nil {
		t.Fatal(err)
	}
	dst2, err := sofa.Open(ctx, tgt2.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err = sofa.Restore(ctx, []*sofa.Endpoint{ar}, dst2, sofa.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.DBsFailed != 1 || sum.DBsOK != len(names)-1 {
		t.Fatalf("restore over a foreign db-007: %d ok, %d failed of %d", sum.DBsOK, sum.DBsFailed, sum.DBsTotal)
	}
	for _, d := range sum.DBs {
		if (d.Name == "db-007") != (d.Status == fleet.StatusFailed) {
			t.Errorf("%s: %s %s", d.Name, d.Status, d.Error)
		}
	}
	for _, n := range names {
		if n != "db-007" {
			couchtest.AssertEqual(t, srv.DBURL(n), tgt2.DBURL(n))
		}
	}
}

// inOrderStore is a Store whose archives can only be read in order, as
// stdin: Size is unknown and ReadAt refused.
type inOrderStore struct{ storage.Memory }

func (s *inOrderStore) Open(ctx context.Context, name string) (storage.Reader, error) {
	r, err := s.Memory.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return inOrderReader{r}, nil
}

type inOrderReader struct{ storage.Reader }

func (inOrderReader) Size() int64 { return -1 }
func (inOrderReader) ReadAt([]byte, int64) (int, error) {
	return 0, storage.ErrNotSeekable
}

// TestRestore_InOrderArchive: an archive that can only be read in order
// (stdin) is restored one database after the other, in archive order,
// and the copy equals the source.
func TestRestore_InOrderArchive(t *testing.T) {
	ctx := t.Context()
	srv := couchtest.Start(t)
	names := manyDBs(t, srv, 12)
	st := &inOrderStore{}
	ar := backupAll(t, srv, st, "all.sofa")
	tgt := couchtest.Start(t)
	rec := recproxy.Start(t, tgt.URL)
	dst, err := sofa.Open(ctx, rec.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := sofa.Restore(ctx, []*sofa.Endpoint{ar}, dst, sofa.RestoreOptions{})
	if err != nil || !sum.Complete() || sum.DBsTotal != len(names) {
		t.Fatalf("restore: %+v, %v", sum, err)
	}
	creates := createdDBs(rec)
	if n := recproxy.MaxInFlight(creates); n != 1 || len(creates) != len(names) {
		t.Errorf("%d databases created, at most %d at once: want %d, one at a time", len(creates), n, len(names))
	}
	// In archive order: the summary lists them as the archive holds them,
	// and each was created after the one before it was done.
	all := rec.Exchanges()
	for i := range creates {
		name := strings.TrimPrefix(creates[i].Path, "/")
		if want := sum.DBs[i].Name; name != want {
			t.Errorf("database %d created: %s, archive order: %s", i, name, want)
		}
		if i+1 == len(creates) {
			break
		}
		for _, e := range all {
			if strings.HasPrefix(e.Path, "/"+name+"/") && e.End.After(creates[i+1].Start) {
				t.Errorf("%s %s still in flight when the next database was created", e.Method, e.Path)
			}
		}
	}
	for _, n := range names {
		couchtest.AssertEqual(t, srv.DBURL(n), tgt.DBURL(n))
	}
}
