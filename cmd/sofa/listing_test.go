package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// TestListing_ShortPagesLoseNoName: a server with more databases than one
// _all_dbs page, behind a proxy that answers limit-1 names per page (as
// CouchDB 3.2.0 does). `sofa ls` and `sofa backup` must see every
// database. PouchDB Server ignores limit and startkey (one page holds
// every name), so this means something on CouchDB only.
func TestListing_ShortPagesLoseNoName(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "PouchDB Server ignores _all_dbs limit and startkey")
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	const n = 1200 // more than one page of 1000
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			// q=1: one shard file per database, to create them quickly
			if _, err := srv.Client().Do(t.Context(), "PUT", fmt.Sprintf("/p-%04d?q=1", i), nil, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	px := faultproxy.StartT(t, srv.URL)
	if err := px.SetRules(faultproxy.Rule{Name: "short", Method: "GET", Path: `^/_all_dbs$`, Fault: faultproxy.DropLast}); err != nil {
		t.Fatal(err)
	}

	r := arSofa(t, bin, nil, "ls", "--json", px.URL)
	r.want(t, exitOK)
	var rows []struct{ Name string }
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, row := range rows {
		seen[row.Name] = true
	}
	for i := range n {
		if name := fmt.Sprintf("p-%04d", i); !seen[name] {
			t.Errorf("sofa ls: %s missing (%d listed)", name, len(rows))
		}
	}
	if len(rows) != n+2 { // and _replicator, _users
		t.Errorf("sofa ls: %d databases, want %d", len(rows), n+2)
	}
	if px.Rule("short").Fired < 2 {
		t.Errorf("the proxy shortened %d pages, want at least 2", px.Rule("short").Fired)
	}

	// backup lists the same way; the selection (applied to the list)
	// keeps the names after the first page and the one at its edge.
	path := filepath.Join(t.TempDir(), "tail.sofa")
	r = arSofa(t, bin, nil, "backup", px.URL, path, "--json", "--include", "p-099[5-9]", "--include", "p-11*")
	r.want(t, exitOK)
	if s := r.summary(t); s.DBsOK != 105 {
		t.Errorf("backup: %d databases ok, want 105", s.DBsOK)
	}
}

// TestLs_ColumnsFitTheirContent: `sofa ls` of a server and of an archive
// pads no column to the width of a long seq (a CouchDB seq is a long
// opaque string): no line holds a run of many spaces.
func TestLs_ColumnsFitTheirContent(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	arCreate(t, srv, "short", true, arSmallDocs("x", 2)...)
	arCreate(t, srv, "a-much-longer-database-name", true, arSmallDocs("y", 30)...)
	path := filepath.Join(t.TempDir(), "ls.sofa")
	arSofa(t, bin, nil, "backup", srv.URL, path, "-q").want(t, exitOK)
	for _, target := range []string{srv.URL, path} {
		r := arSofa(t, bin, nil, "ls", target)
		r.want(t, exitOK)
		for _, line := range strings.Split(r.stdout, "\n") {
			if strings.Contains(line, strings.Repeat(" ", 40)) || strings.HasSuffix(line, " ") {
				t.Errorf("sofa ls %s: padded line %q", target, line)
			}
		}
	}
}

// TestListing_ReaderGoneIsQuiet: `sofa ls SERVER | head` whose reader is
// gone before the listing is written ends with exit 0 and nothing on
// stderr, as a Unix lister does; a backup to a closed stdout still fails
// (TestNU2_BackupClosedStdout).
func TestListing_ReaderGoneIsQuiet(t *testing.T) {
	srv := couchtest.Start(t)
	if err := srv.Client().CreateDB(t.Context(), "listed"); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the reader is gone: every write to w fails with EPIPE
	cmd := exec.CommandContext(t.Context(), sofaBin(t), "ls", srv.URL)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	err = cmd.Run()
	w.Close()
	if err != nil || strings.TrimSpace(stderr.String()) != "" {
		t.Fatalf("sofa ls into a closed pipe: %v, stderr %q (want exit 0, nothing said)", err, stderr.String())
	}
}
