package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// TestCLI_InterruptBackupToStdout: SIGINT during a backup to stdout
// (exit 130) says that what went to stdout is cut short and is to be
// discarded, not that no archive was written.
func TestCLI_InterruptBackupToStdout(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "app", true, arSmallDocs("x", 3)...)
	p := faultproxy.StartT(t, src.URL)
	held := faultproxy.Rule{Name: "held", Path: `^/app/(_changes|_bulk_get)$`, Delay: 10 * time.Minute}
	if err := p.SetRules(held); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "backup", p.URL, "-", "-q")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for p.Rule(held.Name).Matched == 0 { // the backup is reading app
		select {
		case <-ctx.Done():
			t.Fatalf("the source was never read\n%s", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit %d, want %d\n%s", code, exitInterrupted, stderr.String())
	}
	if line := strings.TrimSpace(stderr.String()); !strings.Contains(line, "the archive on stdout is cut short") || strings.Contains(line, "no archive was written") {
		t.Errorf("stderr %q, want it to say the archive on stdout is cut short", line)
	}
}
