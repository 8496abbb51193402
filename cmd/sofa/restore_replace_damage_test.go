package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sofadb/sofa/fleet"
)

// TestRestore_ReplaceChecksTheArchiveFirst (found by a new user on
// CouchDB 3.5: `restore --replace` of a damaged archive deleted the
// database, then failed on the damage and left it empty): --replace reads
// each database's part of the archive through before deleting the
// database, so the one whose part is damaged fails and keeps what it
// held, while the others are rolled back to the archive. From stdin,
// where a part cannot be read before it is restored, --replace is a usage
// error and nothing is deleted.
func TestRestore_ReplaceChecksTheArchiveFirst(t *testing.T) {
	bin := sofaBin(t)
	srv, bad, chunk, dbs := damagedArchive(t, bin)
	damaged := strings.Split(chunk, "/")[1]
	good := filepath.Join(filepath.Dir(bad), "good.sofa")
	// each database gets a document of its own, which a --replace
	// from the archive removes (_users is written into, never replaced)
	counts := map[string]int64{}
	var user []string
	for _, db := range dbs {
		if !strings.HasPrefix(db, "_") {
			user = append(user, db)
			arWrite(t, srv, db, true, arRaw(`{"_id":"added-after-backup"}`))
			counts[db] = arDocCount(t, srv, db)
		}
	}
	if len(user) < 3 {
		t.Fatalf("want a, m and z among the archive's databases: %q", dbs)
	}

	r := arSofa(t, bin, nil, "restore", bad, srv.URL, "--replace", "--json")
	r.want(t, exitFatal)
	got := map[string]fleet.DBResult{}
	for _, d := range r.summary(t).DBs {
		got[d.Name] = d
	}
	for _, db := range user {
		n := arDocCount(t, srv, db)
		if db == damaged {
			d := got[db]
			if d.Status != fleet.StatusFailed || !strings.Contains(d.Error, strconv.Quote(chunk)) || !strings.Contains(d.Error, "as it was") {
				t.Errorf("%s: want failed, naming %s and saying the database is as it was: %+v", db, chunk, d)
			}
			if strings.Count(d.Error, filepath.Base(bad)) != 1 {
				t.Errorf("%s: the error should name the archive once: %s", db, d.Error)
			}
			if n != counts[db] {
				t.Errorf("%s (damaged part): %d documents after --replace, want the %d it held", db, n, counts[db])
			}
			continue
		}
		if d := got[db]; d.Status != fleet.StatusOK || n != counts[db]-1 {
			t.Errorf("%s: status %s, %d documents; want ok and %d (rolled back to the archive)", db, d.Status, n, counts[db]-1)
		}
	}

	f, err := os.Open(good)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	arWrite(t, srv, damaged, true, arRaw(`{"_id":"added-again"}`))
	before := arDocCount(t, srv, damaged)
	r = arSofa(t, bin, f, "restore", "-", srv.URL, "--replace")
	r.want(t, exitUsage)
	if !strings.Contains(r.errLine(t), "stdin") {
		t.Errorf("usage error does not say why stdin is refused: %s", r.errLine(t))
	}
	if n := arDocCount(t, srv, damaged); n != before {
		t.Errorf("after --replace from stdin was refused: %d documents in %s, want %d (untouched)", n, damaged, before)
	}
}
