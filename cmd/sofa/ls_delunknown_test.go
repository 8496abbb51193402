package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// PouchDB Server reports no doc_del_count: `ls` of its backup says the
// count of deleted documents is unknown ("?"), not 0 beside the
// tombstones it stored (a new user read "deleted 0"); CouchDB's is a
// number.
func TestLs_DeletedCountUnknown(t *testing.T) {
	bin := sofaBin(t)
	for _, kind := range []couchtest.Kind{couchtest.PouchDB, couchtest.CouchDB} {
		t.Run(string(kind), func(t *testing.T) {
			src := couchtest.StartKind(t, kind)
			arCreate(t, src, "gone", true, arSmallDocs("d", 3)...)
			c := src.Client()
			var doc map[string]any
			if err := c.GetJSON(t.Context(), "/gone/d00000", &doc); err != nil {
				t.Fatal(err)
			}
			if _, err := c.PutDoc(t.Context(), "gone", "d00000", map[string]any{"_rev": doc["_rev"], "_deleted": true}); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "g.sofa")
			arSofa(t, bin, nil, "backup", src.DBURL("gone"), path, "-q").want(t, exitOK)
			r := arSofa(t, bin, nil, "ls", path)
			r.want(t, exitOK)
			var row []string
			for _, l := range strings.Split(r.stdout, "\n") {
				if f := strings.Fields(l); len(f) > 4 && f[0] == "gone" {
					row = f
				}
			}
			want := "1"
			if kind == couchtest.PouchDB {
				want = "?"
			}
			if len(row) < 5 || row[2] != want || row[4] != "1" {
				t.Errorf("ls row %q: want deleted %s and 1 tombstone\n%s", row, want, r.stdout)
			}
		})
	}
}
