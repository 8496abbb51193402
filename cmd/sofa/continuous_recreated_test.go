package main

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
)

// bgRun is a sofa command running in the background, its stderr read
// line by line.
type bgRun struct {
	t     *testing.T
	ctx   context.Context
	cmd   *exec.Cmd
	lines <-chan string
	log   strings.Builder
}

func startBg(t *testing.T, ctx context.Context, bin string, args ...string) *bgRun {
	t.Helper()
	r := &bgRun{t: t, ctx: ctx, cmd: exec.CommandContext(ctx, bin, args...)}
	r.lines = stderrLines(t, r.cmd)
	return r
}

// waitLine returns the first line from here on matching re.
func (r *bgRun) waitLine(re *regexp.Regexp) string {
	r.t.Helper()
	return waitMatch(r.t, r.ctx, r.lines, &r.log, re)[0]
}

// stop sends sig, reads the rest of stderr and returns the exit code and
// everything printed.
func (r *bgRun) stop(sig syscall.Signal) (int, string) {
	r.t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		r.t.Fatal(err)
	}
	for l := range r.lines {
		r.log.WriteString(l + "\n")
	}
	_ = r.cmd.Wait()
	return r.cmd.ProcessState.ExitCode(), r.log.String()
}

// TestCLI_ContinuousServersRecreatedWhileStopped, the tester's case on
// CouchDB 3.5: `replicate --continuous --delete-missing` of a server is
// killed (SIGKILL) after copying "one" (400 documents); while it is down
// "one" is deleted and created again with one document; the same command
// run again deletes the target's copy of the old database (a line says
// so) and copies the new one, so the target holds 1 document, not 401.
// Without --delete-missing the old documents stay, and the warning about
// the recreation is printed once: not again in the summary at the end.
func TestCLI_ContinuousServersRecreatedWhileStopped(t *testing.T) {
	bin := sofaBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	a, b := couchtest.Start(t), couchtest.Start(t)
	ca, cb := couchtest.NewClient(a.URL), couchtest.NewClient(b.URL)
	if a.Kind == couchtest.CouchDB {
		// _db_updates needs it (as after _cluster_setup)
		if err := ca.CreateDB(ctx, "_global_changes"); err != nil {
			t.Fatal(err)
		}
	}
	for _, db := range []string{"one", "kept"} {
		if err := ca.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		cliLoad(t, a, db, 400)
	}
	args := []string{"replicate", "--continuous", "--delete-missing", "--poll-interval", "200ms", a.URL, b.URL}
	copied := regexp.MustCompile(`initial copy done: \d+ databases? \(\d+ ok, 0 partial, 0 failed\)`)
	r := startBg(t, ctx, bin, args...)
	r.waitLine(copied)
	if code, _ := r.stop(syscall.SIGKILL); code != -1 {
		t.Fatalf("exit %d after SIGKILL", code)
	}
	for _, db := range []string{"one", "kept"} {
		if err := ca.RecreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		if _, err := ca.PutDoc(ctx, db, "fresh", map[string]any{"v": 1}); err != nil {
			t.Fatal(err)
		}
	}
	// Only the checkpoint tells the next run: the feed holds the
	// recreation before that run reads its position.
	if err := couchtest.DBUpdatesSettled(ctx, a); err != nil {
		t.Fatal(err)
	}
	docCount := func(db string) int {
		t.Helper()
		var info struct {
			DocCount int `json:"doc_count"`
		}
		if err := cb.GetJSON(ctx, "/"+db, &info); err != nil {
			t.Fatal(err)
		}
		return info.DocCount
	}

	r = startBg(t, ctx, bin, append(args, "--exclude", "kept")...)
	r.waitLine(copied) // the catch-up deletes the old copy first
	deleted := regexp.MustCompile(`one: deleted and created again on the source since the last checkpoint \(.*\); deleted on the target too`)
	if !deleted.MatchString(r.log.String()) {
		t.Errorf("no line matching %s:\n%s", deleted, r.log.String())
	}
	if n := docCount("one"); n != 1 {
		t.Errorf("the target's one holds %d documents after the catch-up, want 1 (the new database's)", n)
	}
	code, out := r.stop(syscall.SIGINT)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d:\n%s", code, exitInterrupted, out)
	}
	if strings.Contains(out, "recreated") {
		t.Errorf("with --delete-missing, a line still says the old documents stay:\n%s", out)
	}
	couchtest.AssertEqual(t, a.URL+"/one", b.URL+"/one")

	// Without --delete-missing: kept, its recreation said once.
	r = startBg(t, ctx, bin, "replicate", "--continuous", "--poll-interval", "200ms", "--include", "kept", a.URL, b.URL)
	r.waitLine(copied)
	code, out = r.stop(syscall.SIGINT)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d:\n%s", code, exitInterrupted, out)
	}
	if n := strings.Count(out, "recreated"); n != 1 {
		t.Errorf("the recreation of kept said %d times, want once:\n%s", n, out)
	}
	if n := docCount("kept"); n != 401 {
		t.Errorf("the target's kept holds %d documents, want 401 (without --delete-missing the old ones stay)", n)
	}
}
