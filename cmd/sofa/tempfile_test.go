//go:build unix

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// Temporary archive files (storage.Local; its own tests check the sweep
// at function level): a backup flocks its .NAME.tmp-HEX for its whole
// life, and the next backup to NAME removes every such file it can lock
// (the leftover of a killed backup) and keeps those it cannot (a running
// backup's).

// tempNames lists the temporary archive files of final name base in dir.
func tempNames(t *testing.T, dir, base string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "."+base+".tmp-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// lockedFile creates path and holds its flock until the test ends.
func lockedFile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
}

// TestTemp_BackupCLI, through the binary against PouchDB Server: a stale
// leftover is removed by the next backup and a locked one kept; a backup
// killed with SIGKILL mid-run leaves its temporary file, which the next
// successful backup removes; a backup running meanwhile keeps its own
// temporary file and still finishes.
func TestTemp_BackupCLI(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	arCreate(t, srv, "db", true, arSmallDocs("d", 2000)...)
	dir := t.TempDir()
	path := filepath.Join(dir, "db.sofa")

	// Stale and locked leftovers.
	stale := filepath.Join(dir, ".db.sofa.tmp-0123456789ab")
	if err := os.WriteFile(stale, []byte("partial archive"), 0o600); err != nil {
		t.Fatal(err)
	}
	held := filepath.Join(dir, ".db.sofa.tmp-ba9876543210")
	lockedFile(t, held)
	arSofa(t, bin, nil, "backup", srv.DBURL("db"), path, "-q").want(t, exitOK)
	if got := tempNames(t, dir, "db.sofa"); !slices.Equal(got, []string{filepath.Base(held)}) {
		t.Errorf("temporary files after the backup: %q, want only the locked %s", got, filepath.Base(held))
	}
	if err := os.Remove(held); err != nil {
		t.Fatal(err)
	}

	// SIGKILL mid-run: the proxy slows every _changes page and _bulk_get
	// so the run lasts.
	px := faultproxy.StartT(t, srv.URL)
	slow := func() {
		t.Helper()
		if err := px.SetRules(faultproxy.Rule{Name: "slow", Path: `/_(bulk_get|changes)$`, Delay: 300 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	startSlow := func(final string) (*exec.Cmd, *bytes.Buffer, <-chan error) {
		t.Helper()
		fired := px.Rule("slow").Fired
		cmd := exec.Command(bin, "backup", px.URL+"/db", final, "-q", "--force", "--fetch-batch", "50", "--batch-size", "50", "--changes-page", "50")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		deadline := time.Now().Add(30 * time.Second)
		for px.Rule("slow").Fired < fired+3 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if px.Rule("slow").Fired < fired+3 {
			cmd.Process.Kill()
			<-done
			t.Fatalf("backup did not get going: %s", stderr.String())
		}
		return cmd, &stderr, done
	}
	killed := filepath.Join(dir, "killed.sofa")
	slow()
	cmd, stderr, done := startSlow(killed)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("backup ended before the kill (%v): %s", cmd.ProcessState, stderr.String())
	}
	left := tempNames(t, dir, "killed.sofa")
	if len(left) != 1 {
		t.Fatalf("a killed backup left %q, want one temporary file (else this test tests nothing)", left)
	}
	arSofa(t, bin, nil, "backup", srv.DBURL("db"), killed, "-q").want(t, exitOK)
	if got := tempNames(t, dir, "killed.sofa"); len(got) != 0 {
		t.Errorf("the successful rerun left %q (the killed run's %s should be gone)", got, left[0])
	}
	if l := arLs(t, bin, killed); l.db(t, "db").Revisions != 2000 {
		t.Errorf("archive after the kill: %+v", l.db(t, "db"))
	}

	// A running backup's temporary file survives another backup to the
	// same name, and the running backup then finishes.
	cmd, stderr, done = startSlow(path)
	running := tempNames(t, dir, "db.sofa")
	if len(running) != 1 {
		t.Fatalf("running backup's temporary files: %q", running)
	}
	arSofa(t, bin, nil, "backup", srv.DBURL("db"), path, "-q", "--force").want(t, exitOK)
	if got := tempNames(t, dir, "db.sofa"); !slices.Equal(got, running) {
		t.Errorf("after a second backup: %q, want the running one's %q kept", got, running)
	}
	px.SetRules()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("running backup failed: %v\n%s", err, stderr.String())
		}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatal("running backup did not finish")
	}
	if got := tempNames(t, dir, "db.sofa"); len(got) != 0 {
		t.Errorf("temporary files after both backups: %q", got)
	}
	if l := arLs(t, bin, path); l.db(t, "db").Revisions != 2000 {
		t.Errorf("archive of the running backup: %+v", l.db(t, "db"))
	}
}
