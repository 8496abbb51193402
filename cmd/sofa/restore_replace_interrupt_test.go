package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// TestRestore_ReplaceInterrupted: a restore --replace interrupted (SIGINT
// once a batch of the database it deleted is written) says what a rerun
// does, and both halves are true: the same command deletes the database
// again (what the interrupted run wrote) and restores it from the start;
// without --replace, a rerun resumes it from its checkpoint. It no longer
// says "checkpoints written; run the same command again to resume".
func TestRestore_ReplaceInterrupted(t *testing.T) {
	const total = 4000
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	if err := srv.Client().CreateDB(t.Context(), "big"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, srv, "big", total)
	path := filepath.Join(t.TempDir(), "big.sofa")
	arSofa(t, bin, nil, "backup", srv.URL, path, "-q", "--include", "big").want(t, exitOK)
	// each write (of 100 documents, 2 at once) waits at the proxy: the
	// restore cannot end before the signal that follows its first batch
	// arrives
	px := faultproxy.StartT(t, srv.URL)
	if err := px.SetRules(faultproxy.Rule{Method: "POST", Path: `/big/_bulk_docs$`, Delay: 150 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	want := `sofa: interrupted: --replace deleted "big" and did not restore it completely; the same command run again deletes each selected database the target holds again (those restored too) and restores it from the start; run without --replace, it resumes the databases this run recreated from their checkpoints`

	held, all := interruptReplace(t, bin, path, px.URL)
	if held != total {
		t.Errorf("first run: deleting %d documents, want %d", held, total)
	}
	if !strings.Contains(all, want) || strings.Contains(all, "checkpoints written; run the same command again to resume") {
		t.Fatalf("interrupted --replace does not say what a rerun does (want %q):\n%s", want, all)
	}
	written := docCount(t, srv, "big")
	if written <= 0 || written >= total {
		t.Fatalf("after the interrupt: %d documents, want some of %d", written, total)
	}

	// the same command: the database deleted again, restored from the start
	r := arSofa(t, bin, nil, "restore", "--replace", "--json", path, srv.URL)
	r.want(t, exitOK)
	if got := r.summary(t).Replaced; len(got) != 1 || got[0].DocCount != written {
		t.Errorf("rerun with --replace: replaced %+v, want big holding %d documents", got, written)
	}
	if d := rbResult(t, r, "big"); d.DocsRead != total {
		t.Errorf("rerun with --replace: docs_read %d, want %d (from the start)", d.DocsRead, total)
	}

	// interrupted again; without --replace the rerun resumes
	if _, all = interruptReplace(t, bin, path, px.URL); !strings.Contains(all, want) {
		t.Fatalf("second interrupt: want %q:\n%s", want, all)
	}
	r = arSofa(t, bin, nil, "restore", "--json", path, srv.URL)
	r.want(t, exitOK)
	if d := rbResult(t, r, "big"); d.DocsRead <= 0 || d.DocsRead >= total {
		t.Errorf("rerun without --replace: docs_read %d, want fewer than %d (resumed)", d.DocsRead, total)
	}
	if n := docCount(t, srv, "big"); n != total {
		t.Errorf("after the rerun: %d documents, want %d", n, total)
	}
}

// interruptReplace runs restore --replace of path into the server at
// url, sends SIGINT once a batch of "big" is written, and returns the
// documents the replacing line said big held and stderr; it fails the
// test unless sofa exits 130.
func interruptReplace(t *testing.T, bin, path, url string) (int64, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "restore", "--replace", "--debug", "--batch-size", "100", "--workers", "2", path, url)
	lines := stderrLines(t, cmd)
	all := &strings.Builder{}
	m := waitMatch(t, ctx, lines, all, regexp.MustCompile(`^sofa: replacing "big" on the target: deleting it \((\d+) documents`))
	held, _ := strconv.ParseInt(m[1], 10, 64)
	waitMatch(t, ctx, lines, all, regexp.MustCompile(`^sofa: big: batch \d+: `))
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		all.WriteString(l + "\n")
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit code %d, want %d:\n%s", code, exitInterrupted, all.String())
	}
	return held, fmt.Sprint(all.String())
}
