package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
)

// Defects found by a new user on CouchDB 3.5 (nu-report3).

// TestNU3_ReuseExistingVerifyFull (item 3): a document edited on the
// target since the backup keeps its newer revision under
// --reuse-existing, and --verify full says so as every other check does
// ("ok with warnings": not rolled back), exit 0: the archive's revision
// is in the target's revision tree, below the edit, not missing.
func TestNU3_ReuseExistingVerifyFull(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	arCreate(t, srv, "rv", true, arRaw(`{"_id":"d","v":1}`), arRaw(`{"_id":"e","v":1}`))
	path := filepath.Join(t.TempDir(), "rv.sofa")
	arSofa(t, bin, nil, "backup", srv.URL, path, "-q", "--include", "rv").want(t, exitOK)
	var d struct {
		Rev string `json:"_rev"`
	}
	if err := srv.Client().GetJSON(t.Context(), "/rv/d", &d); err != nil {
		t.Fatal(err)
	}
	if err := srv.Client().PutJSON(t.Context(), "/rv/d", map[string]any{"_rev": d.Rev, "v": 2}, nil); err != nil {
		t.Fatal(err)
	}
	for _, verify := range []string{"cheap", "full"} {
		r := arSofa(t, bin, nil, "restore", path, srv.URL, "--reuse-existing", "--verify", verify, "--json")
		r.want(t, exitOK)
		got := rbResult(t, r, "rv")
		if got.Status != fleet.StatusOK || len(got.Failures) != 0 || len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], "not rolled back: 1 of 2") {
			t.Errorf("--verify %s: status %s, failures %+v, warnings %q; want ok, none, one \"not rolled back: 1 of 2\"", verify, got.Status, got.Failures, got.Warnings)
		}
	}
}
