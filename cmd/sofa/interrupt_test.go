package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// interruptedCopy starts `replicate --continuous` into a target behind a
// fault proxy, waits until it copied 30 writes made after it caught up
// while the target refuses every checkpoint (503: its `_local` PUTs), and
// sends SIGINT: the copy has progress its final checkpoint cannot record.
// It returns the process, its stderr lines so far and the channel of the
// next ones.
//
// servers: the copy is a whole-server one (database src of one server
// into another) instead of src into tgt on one server.
// extra flags are added to the command line; its stdout goes to out (nil:
// discarded).
func interruptedCopy(t *testing.T, ctx context.Context, servers bool, out io.Writer, extra ...string) (*exec.Cmd, *strings.Builder, <-chan string) {
	t.Helper()
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	c := srv.Client()
	tsrv, tdb := srv, "tgt"
	for _, db := range []string{"src", "tgt"} {
		if err := c.CreateDB(t.Context(), db); err != nil {
			t.Fatal(err)
		}
	}
	cliLoad(t, srv, "src", 20)
	args := []string{"replicate", "--continuous", "--flush-interval", "50ms", srv.URL + "/src", "/tgt"}
	caught := "src: caught up"
	if servers {
		tsrv, tdb = couchtest.StartKind(t, srv.Kind), "src"
		args = []string{"replicate", "--continuous", "--include", "src", srv.URL, ""}
		caught = "initial copy done"
	}
	px := faultproxy.StartT(t, tsrv.URL)
	args[len(args)-1] = px.URL + args[len(args)-1]
	args = append(args, extra...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout = out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	all := &strings.Builder{}
	waitLine(t, ctx, lines, all, caught)
	if err := px.SetRules(faultproxy.Rule{Method: "PUT", Path: `/_local/`, Fault: faultproxy.Status, Status: 503}); err != nil {
		t.Fatal(err)
	}
	var docs []json.RawMessage
	for i := range 30 {
		docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"live%02d"}`, i)))
	}
	if _, err := c.BulkDocs(t.Context(), "src", true, docs...); err != nil {
		t.Fatal(err)
	}
	for docCount(t, tsrv, tdb) != 50 {
		select {
		case <-ctx.Done():
			t.Fatalf("the writes never reached the target:\n%s", all.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitLine(t, ctx, lines, all, "interrupt again to stop at once")
	return cmd, all, lines
}

// waitLine reads lines into all until one contains what.
func waitLine(t *testing.T, ctx context.Context, lines <-chan string, all *strings.Builder, what string) {
	t.Helper()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("sofa ended before saying %q:\n%s", what, all.String())
			}
			all.WriteString(l + "\n")
			if strings.Contains(l, what) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("sofa never said %q:\n%s", what, all.String())
		}
	}
}

// An interrupted copy whose target does not take its final checkpoint
// says so (not "checkpoints written") and exits 130; a second SIGINT
// while it tries stops it at once, saying so.
func TestCLI_InterruptTargetDown(t *testing.T) {
	for _, c := range []struct {
		name    string
		servers bool
		says    string
	}{
		{"final checkpoint refused", false, "the final checkpoint could not be written"},
		{"servers, final checkpoint refused", true, "the final checkpoints of 1 database could not be written"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			cmd, all, lines := interruptedCopy(t, ctx, c.servers, nil)
			for l := range lines {
				all.WriteString(l + "\n")
			}
			_ = cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
				t.Fatalf("exit %d, want %d\n%s", code, exitInterrupted, all.String())
			}
			if s := all.String(); strings.Contains(s, "checkpoints written;") || !strings.Contains(s, c.says) {
				t.Errorf("stderr should say the final checkpoint was not written (%q):\n%s", c.says, s)
			}
		})
	}
	t.Run("second interrupt", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		var stdout bytes.Buffer
		cmd, all, lines := interruptedCopy(t, ctx, false, &stdout, "--json")
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		for l := range lines {
			all.WriteString(l + "\n")
		}
		_ = cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != exitInterrupted || !strings.Contains(all.String(), "interrupted again: stopped at once") {
			t.Fatalf("exit %d after %s, want %d saying it stopped at once\n%s", code, time.Since(t0), exitInterrupted, all.String())
		}
		// --json: one document on stdout, saying so.
		var doc struct {
			Status   string `json:"status"`
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil || doc.Status != "interrupted" || doc.ExitCode != exitInterrupted || !strings.Contains(doc.Error, "stopped at once") {
			t.Errorf("--json stdout after a second interrupt: %v, %q", err, stdout.String())
		}
		// At once: not after the final checkpoint's attempts ran out.
		if strings.Contains(all.String(), "the final checkpoint could not be written") {
			t.Errorf("the run waited for its final checkpoint after the second interrupt (%s):\n%s", time.Since(t0), all.String())
		}
	})
}
