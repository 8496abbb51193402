package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// A restore read in order (from stdin) reports its progress as one read
// at offsets does: its closing progress line counts the databases and
// documents restored (it printed none at all before).
func TestCLI_RestoreStdinProgress(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	for _, db := range []string{"pa", "pb"} {
		arCreate(t, src, db, true, arSmallDocs("d", 7)...)
	}
	arch := filepath.Join(t.TempDir(), "p.sofa")
	cliRun(t, bin, "backup", src.URL, arch, "--include", "p*", "-q").wantCode(t, exitOK)
	tgt := couchtest.StartKind(t, src.Kind)
	f, err := os.Open(arch)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := cliRunStdin(t, bin, f, "restore", "-", tgt.URL, "--progress-interval", "1h")
	r.wantCode(t, exitOK)
	var final string
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.Contains(l, "progress final") {
			final = l
		}
	}
	if !strings.Contains(final, "dbs_done=2 dbs_total=2") || !strings.Contains(final, "docs_written=14") {
		t.Errorf("closing progress line %q, want 2 of 2 databases and 14 documents written\n%s", final, r.stderr)
	}
}
