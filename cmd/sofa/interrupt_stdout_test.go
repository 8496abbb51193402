package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// interruptWhenHeld runs sofa with args until the proxy p holds a
// request matching held (a delay of minutes), then sends SIGINT and wants
// exit 130; it returns stdout and stderr.
func interruptWhenHeld(t *testing.T, p *faultproxy.Proxy, held faultproxy.Rule, args ...string) (string, string) {
	t.Helper()
	return signalWhenHeld(t, p, held, syscall.SIGINT, args...)
}

// signalWhenHeld is interruptWhenHeld with the signal sig.
func signalWhenHeld(t *testing.T, p *faultproxy.Proxy, held faultproxy.Rule, sig syscall.Signal, args ...string) (string, string) {
	t.Helper()
	if err := p.SetRules(held); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sofaBin(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for p.Rule(held.Name).Matched == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("no request matched %s\n%s", held.Path, stderr.String())
		case <-tick.C:
		}
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit %d, want %d\n%s", code, exitInterrupted, stderr.String())
	}
	return stdout.String(), stderr.String()
}

// TestCLI_InterruptBackupToStdout: SIGINT during a backup to stdout
// (exit 130) says that what went to stdout is cut short and is to be
// discarded, not that no archive was written.
func TestCLI_InterruptBackupToStdout(t *testing.T) {
	src := couchtest.Start(t)
	arCreate(t, src, "app", true, arSmallDocs("x", 3)...)
	p := faultproxy.StartT(t, src.URL)
	held := faultproxy.Rule{Name: "held", Path: `^/app/(_changes|_bulk_get)$`, Delay: 10 * time.Minute}
	_, stderr := interruptWhenHeld(t, p, held, "backup", p.URL, "-", "-q")
	if line := strings.TrimSpace(stderr); !strings.Contains(line, "the archive on stdout is cut short") || strings.Contains(line, "no archive was written") {
		t.Errorf("stderr %q, want it to say the archive on stdout is cut short", line)
	}
}

// TestCLI_InterruptBackupBeforeSummary: SIGINT while an incremental
// backup still lists the source (before any database is read) says that
// no archive was written, as later, not that checkpoints were written
// and a rerun resumes (a new user saw that wording).
func TestCLI_InterruptBackupBeforeSummary(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "app", true, arSmallDocs("x", 3)...)
	dir := t.TempDir()
	full := dir + "/full.sofa"
	arSofa(t, bin, nil, "backup", src.URL, full, "-q").want(t, exitOK)
	p := faultproxy.StartT(t, src.URL)
	held := faultproxy.Rule{Name: "held", Path: `^/_all_dbs$`, Delay: 10 * time.Minute}
	_, stderr := interruptWhenHeld(t, p, held, "backup", p.URL, dir+"/inc.sofa", "--since", full, "-q")
	if line := strings.TrimSpace(stderr); !strings.Contains(line, "no archive was written") || strings.Contains(line, "resume") {
		t.Errorf("stderr %q, want it to say no archive was written", line)
	}
}

// TestCLI_InterruptBackupJSON: an interrupted backup's --json document
// says what its stderr line says (no archive was written), not that
// checkpoints were written and a rerun resumes.
func TestCLI_InterruptBackupJSON(t *testing.T) {
	src := couchtest.Start(t)
	arCreate(t, src, "app", true, arSmallDocs("x", 3)...)
	p := faultproxy.StartT(t, src.URL)
	held := faultproxy.Rule{Name: "held", Path: `^/app/(_changes|_bulk_get)$`, Delay: 10 * time.Minute}
	stdout, _ := interruptWhenHeld(t, p, held, "backup", p.URL, t.TempDir()+"/a.sofa", "--json")
	var doc struct {
		Status   string `json:"status"`
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("stdout is no JSON document: %v\n%s", err, stdout)
	}
	if doc.Status != "interrupted" || doc.ExitCode != exitInterrupted || !strings.Contains(doc.Error, "no archive was written") || strings.Contains(doc.Error, "resume") {
		t.Errorf("--json %+v, want status interrupted, exit_code 130, error saying no archive was written", doc)
	}
}

// TestCLI_InterruptQuiet: -q ("print nothing but errors") keeps the
// first interrupt's "stopping" line off stderr; the closing line, which
// says how the run ended, stays.
func TestCLI_InterruptQuiet(t *testing.T) {
	src := couchtest.Start(t)
	arCreate(t, src, "src", true, arSmallDocs("x", 3)...)
	p := faultproxy.StartT(t, src.URL)
	held := faultproxy.Rule{Name: "held", Path: `^/src/_changes$`, Delay: 10 * time.Minute}
	_, stderr := interruptWhenHeld(t, p, held, "replicate", "--continuous", "-q", p.URL+"/src", src.URL+"/tgt", "--create-target")
	if strings.Contains(stderr, "stopping") || !strings.Contains(stderr, "interrupted") {
		t.Errorf("stderr %q: want the closing line alone, no stopping line", stderr)
	}
}

// TestCLI_HangupBackup: SIGHUP (a closed terminal or ssh session) stops
// a backup as SIGINT does: exit 130, no archive and no temporary file
// left (it exited 129 and left .a.sofa.tmp-*).
func TestCLI_HangupBackup(t *testing.T) {
	src := couchtest.Start(t)
	arCreate(t, src, "app", true, arSmallDocs("x", 3)...)
	p := faultproxy.StartT(t, src.URL)
	held := faultproxy.Rule{Name: "held", Path: `^/app/(_changes|_bulk_get)$`, Delay: 10 * time.Minute}
	dir := t.TempDir()
	_, stderr := signalWhenHeld(t, p, held, syscall.SIGHUP, "backup", p.URL, dir+"/a.sofa")
	if !strings.Contains(stderr, "no archive was written") {
		t.Errorf("stderr %q, want it to say no archive was written", stderr)
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("left %v", left)
	}
}

// TestCLI_InterruptBackupAtWelcome: SIGINT while the source has not
// answered its first request (a server that accepts and never answers)
// says that no archive was written, not that checkpoints were.
func TestCLI_InterruptBackupAtWelcome(t *testing.T) {
	src := couchtest.Start(t)
	p := faultproxy.StartT(t, src.URL)
	held := faultproxy.Rule{Name: "held", Path: `^/$`, Delay: 10 * time.Minute}
	dir := t.TempDir()
	_, stderr := interruptWhenHeld(t, p, held, "backup", p.URL, dir+"/a.sofa")
	if !strings.Contains(stderr, "no archive was written") || strings.Contains(stderr, "checkpoints written") {
		t.Errorf("stderr %q, want it to say no archive was written", stderr)
	}
}
