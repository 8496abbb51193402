//go:build unix

package main

import (
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// TestMaxConns_OpenFileLimitWarned: a --max-conns the open-file limit
// cannot hold for both servers is warned of once at the start, naming the
// limit; one that fits is not; the copy is made either way.
func TestMaxConns_OpenFileLimitWarned(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	if err := srv.Client().CreateDB(t.Context(), "src"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, srv, "src", 10)
	// the shell lowers the hard limit too, so Go's start-up cannot raise it
	limited := func(conns string, tgt string) cliResult {
		return cliRun(t, "/bin/sh", "-c", `ulimit -n 256 && exec "$0" "$@"`, bin,
			"replicate", srv.URL+"/src", srv.URL+"/"+tgt, "--create-target", "--max-conns", conns)
	}
	r := limited("150", "tgt1")
	r.wantCode(t, exitOK)
	if n := strings.Count(r.stderr, "open-file limit of 256"); n != 1 {
		t.Errorf("--max-conns 150 under ulimit -n 256: %d warnings naming the limit, want 1:\n%s", n, r.stderr)
	}
	if !strings.Contains(r.stderr, "2 server(s) may hold 300 connections") {
		t.Errorf("the warning does not count both servers' connections:\n%s", r.stderr)
	}
	r = limited("50", "tgt2")
	r.wantCode(t, exitOK)
	if strings.Contains(r.stderr, "open-file limit") {
		t.Errorf("--max-conns 50 fits under ulimit -n 256 and was warned of:\n%s", r.stderr)
	}
}

// TestOpenFilesWarning: the sum of the servers' connections and the
// reserve is compared with the limit.
func TestOpenFilesWarning(t *testing.T) {
	if openFilesWarning(32, 2, 128) != "" {
		t.Error("2 x 32 + 64 = 128 fits a limit of 128")
	}
	if openFilesWarning(33, 2, 128) == "" {
		t.Error("2 x 33 + 64 = 130 does not fit a limit of 128")
	}
}
