package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// TestServers_QuietFailureOnce: under -q, a whole-server run that fails
// prints its failure once: the closing line, which gives the database
// and its error, and not the database's line of the summary before it
// too (found by a reviewer: the same failure on two lines, one after
// the other). A run in which every database failed (a target database
// that is not empty), one stopped by a lost target (its writes reset
// for longer than --retry-time), a one-database copy and a backup whose
// server is lost the same way.
func TestServers_QuietFailureOnce(t *testing.T) {
	bin := sofaBin(t)
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	for _, db := range []string{"taken", "keep"} {
		if err := src.Client().CreateDB(t.Context(), db); err != nil {
			t.Fatal(err)
		}
		cliLoad(t, src, db, 5)
	}
	if err := tgt.Client().CreateDB(t.Context(), "taken"); err != nil {
		t.Fatal(err)
	}
	if _, err := tgt.Client().PutDoc(t.Context(), "taken", "theirs", map[string]any{"a": 1}); err != nil {
		t.Fatal(err)
	}
	once := func(t *testing.T, r cliResult, db, says string) {
		t.Helper()
		r.wantCode(t, exitFatal)
		if testing.Verbose() {
			t.Log(r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], `"`+db+`"`) && !strings.Contains(lines[0], db+": ") || !strings.Contains(lines[0], says) {
			t.Errorf("-q printed other than one line giving %s's failure (%s):\n%s", db, says, r.stderr)
		}
	}
	t.Run("nothing done", func(t *testing.T) {
		r := cliRun(t, bin, "replicate", src.URL, tgt.URL, "--include", "taken", "-q")
		once(t, r, "taken", "nothing was copied: database \"taken\" failed: target database exists and is not empty")
	})
	t.Run("target lost", func(t *testing.T) {
		px := faultproxy.StartT(t, tgt.URL)
		if err := px.SetRules(faultproxy.Rule{Fault: faultproxy.Reset, Path: `^/keep/_bulk_docs$`}); err != nil {
			t.Fatal(err)
		}
		r := cliRun(t, bin, "replicate", src.URL, px.URL, "--include", "keep", "--retry-time", "1s", "-q")
		once(t, r, "keep", "stopped, no further database started: keep: target:")
	})
	t.Run("one database, target lost", func(t *testing.T) {
		px := faultproxy.StartT(t, tgt.URL)
		if err := px.SetRules(faultproxy.Rule{Fault: faultproxy.Reset, Path: `^/one/_bulk_docs$`}); err != nil {
			t.Fatal(err)
		}
		r := cliRun(t, bin, "replicate", src.URL+"/keep", px.URL+"/one", "--create-target", "--retry-time", "1s", "-q")
		once(t, r, "one", "_bulk_docs")
	})
	t.Run("backup, source lost", func(t *testing.T) {
		px := faultproxy.StartT(t, src.URL)
		if err := px.SetRules(faultproxy.Rule{Fault: faultproxy.Reset, Path: `^/keep/_changes$`}); err != nil {
			t.Fatal(err)
		}
		r := cliRun(t, bin, "backup", px.URL, filepath.Join(t.TempDir(), "b.sofa"), "--include", "keep", "--retry-time", "1s", "-q")
		once(t, r, "keep", "_changes")
	})
}
