package sofa_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// cancelAfter is a Progress that calls cancel once database db ended.
type cancelAfter struct {
	db     string
	cancel context.CancelFunc
	once   sync.Once
}

func (p *cancelAfter) Start(int, func(bool) string) {}
func (p *cancelAfter) Begin(string) sofa.DBProgress { return nil }
func (p *cancelAfter) End(db string, _ sofa.DBProgress, _ bool) {
	if db == p.db {
		p.once.Do(p.cancel)
	}
}

// An interrupted backup writes no archive, and its Summary says so: no
// database ok, docs_written 0, the database read whole counted as not
// written, what was read still counted (docs_read).
func TestBackup_InterruptedSummaryNotWritten(t *testing.T) {
	srv := couchtest.Start(t)
	c := srv.Client()
	for _, db := range []string{"done", "slow"} {
		if err := c.CreateDB(t.Context(), db); err != nil {
			t.Fatal(err)
		}
		var docs []json.RawMessage
		for i := range 20 {
			docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"d%02d"}`, i)))
		}
		if _, err := c.BulkDocs(t.Context(), db, true, docs...); err != nil {
			t.Fatal(err)
		}
	}
	// slow's changes feed is held until the run is interrupted
	p := faultproxy.StartT(t, srv.URL)
	if err := p.SetRules(faultproxy.Rule{Path: `^/slow/_changes$`, Delay: 2 * time.Minute, Fault: faultproxy.Forward}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	path := filepath.Join(t.TempDir(), "out.sofa")
	sum, err := sofa.Backup(ctx, openAt(t, p.URL, nil), openAt(t, path, nil), sofa.BackupOptions{
		Selection:  sofa.Selection{Include: []string{"done", "slow"}},
		RunControl: sofa.RunControl{Progress: &cancelAfter{db: "done", cancel: cancel}},
	})
	if !errors.Is(err, context.Canceled) || sum == nil {
		t.Fatalf("backup: %+v, %v; want a summary and context.Canceled", sum, err)
	}
	if !sum.ArchiveNotWritten || sum.DBsOK != 0 || sum.DocsWritten != 0 || sum.DBsNotWritten != 1 || sum.DocsRead < 20 {
		t.Errorf("summary: archive_not_written=%v dbs_ok=%d dbs_not_written=%d docs_written=%d docs_read=%d; want true, 0, 1, 0, >= 20",
			sum.ArchiveNotWritten, sum.DBsOK, sum.DBsNotWritten, sum.DocsWritten, sum.DocsRead)
	}
	for _, d := range sum.DBs {
		if d.DocsWritten != 0 || (d.Name == "done") != (d.Status == fleet.StatusNotWritten) {
			t.Errorf("database %s: %s, docs_written=%d; want not_written (done only), 0", d.Name, d.Status, d.DocsWritten)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("archive %s: %v; want none", path, err)
	}
}

// A backup given a context already cancelled reads nothing and writes
// no archive; a Summary, if any, counts no database ok and nothing
// written.
func TestBackup_CancelledContext(t *testing.T) {
	srv := couchtest.Start(t)
	if err := srv.Client().CreateDB(t.Context(), "one"); err != nil {
		t.Fatal(err)
	}
	server := openAt(t, srv.URL, nil)
	path := filepath.Join(t.TempDir(), "out.sofa")
	dst := openAt(t, path, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	sum, err := sofa.Backup(ctx, server, dst, sofa.BackupOptions{Selection: sofa.Selection{Include: []string{"one"}}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("backup: %+v, %v; want context.Canceled", sum, err)
	}
	if sum != nil && (sum.DBsOK != 0 || sum.DocsWritten != 0 || !sum.ArchiveNotWritten) {
		t.Errorf("summary %+v; want no database ok, nothing written, archive_not_written", sum)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("archive %s: %v; want none", path, err)
	}
}
