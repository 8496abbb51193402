package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// `replicate --continuous` copies, says it has caught up, copies the
// writes made while it runs, and on SIGTERM writes its final checkpoint
// and exits 130; a rerun resumes from that checkpoint (nothing to copy).
func TestCLI_ContinuousOneDatabase(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	c := srv.Client()
	for _, db := range []string{"src", "tgt"} {
		if err := c.CreateDB(t.Context(), db); err != nil {
			t.Fatal(err)
		}
	}
	cliLoad(t, srv, "src", 50)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "replicate", "--continuous", "--flush-interval", "50ms",
		srv.AdminURL()+"/src", srv.AdminURL()+"/tgt")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	var all strings.Builder
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	waitLine := func(what string) {
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
	waitLine("src: caught up")
	var docs []json.RawMessage
	for i := range 30 {
		docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"live%02d"}`, i)))
	}
	if _, err := c.BulkDocs(t.Context(), "src", true, docs...); err != nil {
		t.Fatal(err)
	}
	for docCount(t, srv, "tgt") != 80 {
		select {
		case <-ctx.Done():
			t.Fatalf("the writes made while following never reached the target:\n%s", all.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		all.WriteString(l + "\n")
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit %d, want %d\n%s", code, exitInterrupted, all.String())
	}
	if !strings.Contains(all.String(), "interrupted: checkpoints written") {
		t.Errorf("stderr does not say the checkpoint was written:\n%s", all.String())
	}
	again := cliRun(t, bin, "replicate", "--json", srv.AdminURL()+"/src", srv.AdminURL()+"/tgt")
	again.wantCode(t, exitOK)
	if d := again.result(t); d.Stats.ChangesRead != 0 {
		t.Errorf("rerun read %d changes, want 0 (the final checkpoint covers them)\n%s", d.Stats.ChangesRead, again.stdout)
	}

	// Whole-server continuous replication is not there yet: a usage
	// error saying so, before anything is copied.
	px := faultproxy.StartT(t, srv.URL)
	servers := cliRun(t, bin, "replicate", "--continuous", srv.AdminURL(), px.URL)
	servers.wantCode(t, exitUsage)
	if !strings.Contains(servers.stderr, "not yet supported") {
		t.Errorf("stderr does not say whole-server --continuous is not there yet:\n%s", servers.stderr)
	}
}
