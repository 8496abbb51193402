package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// TestRestore_VerifyFlag: restore --verify takes none, cheap or full (a
// database checked after its restore, against the archive; see
// sofa.RestoreOptions.Verify) and refuses anything else with exit 2,
// before the target is contacted.
func TestRestore_VerifyFlag(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "v", true, arSmallDocs("d", 30)...)
	path := filepath.Join(t.TempDir(), "v.sofa")
	arSofa(t, bin, nil, "backup", src.DBURL("v"), path, "-q").want(t, exitOK)
	r := arSofa(t, bin, nil, "restore", path, "http://127.0.0.1:1/v", "--verify", "sometimes")
	r.want(t, exitUsage)
	if msg := strings.TrimSpace(r.stderr); strings.Contains(msg, "\n") || !strings.Contains(msg, `--verify "sometimes"`) {
		t.Errorf("want one line naming --verify, got %q", r.stderr)
	}
	tgt := couchtest.Start(t)
	for i, mode := range []string{"cheap", "full"} {
		name := []string{"v1", "v2"}[i]
		arSofa(t, bin, nil, "restore", path, tgt.DBURL(name), "--verify", mode, "-q").want(t, exitOK)
		arEqual(t, src, "v", tgt, name)
	}
}
