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

// Temporary archive files: a backup flocks its .NAME.tmp-HEX for its whole
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
	if err := lockTemp(f); err != nil {
		t.Fatal(err)
	}
}

// TestTemp_StaleRemovedLockedKept, at function level: createArchive
// removes an unlocked leftover, keeps a locked one and every file not named
// exactly like a temporary file of this final name, holds the lock on its
// own file, and commit leaves no temporary file of its own.
func TestTemp_StaleRemovedLockedKept(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.sofa")
	stale := filepath.Join(dir, ".x.sofa.tmp-aabbccddeeff")
	if err := os.WriteFile(stale, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyStale := filepath.Join(dir, ".x.sofa.tmp-000000000000")
	if err := os.WriteFile(emptyStale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	held := filepath.Join(dir, ".x.sofa.tmp-112233445566")
	lockedFile(t, held)
	keep := []string{
		".x.sofa.tmp-notes.txt",     // not hex
		".y.sofa.tmp-aabbccddeeff",  // another final name
		"x.sofa.tmp-aabbccddeeff",   // not hidden
		".x.sofa.tmp-",              // no suffix
		".xx.sofa.tmp-aabbccddeeff", // another final name sharing a prefix
	}
	for _, n := range keep {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	sink, err := createArchive(path, false)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(sink.stale)
	if want := []string{emptyStale, stale}; !slices.Equal(sink.stale, want) {
		t.Errorf("removed %q, want %q", sink.stale, want)
	}
	for _, p := range []string{stale, emptyStale} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("stale %s not removed", filepath.Base(p))
		}
	}
	if _, err := os.Stat(held); err != nil {
		t.Errorf("locked temporary file removed: %v", err)
	}
	for _, n := range keep {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("unrelated file %s removed: %v", n, err)
		}
	}
	// The sink's own file is locked: a second scan (another backup) keeps it.
	if got := removeStaleTemps(path); len(got) != 0 {
		t.Errorf("a second scan removed %q while the sink is open", got)
	}
	if _, err := os.Stat(sink.tmp); err != nil {
		t.Fatalf("own temporary file: %v", err)
	}
	if _, err := sink.w.Write([]byte("archive")); err != nil {
		t.Fatal(err)
	}
	if err := sink.commit(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "archive" {
		t.Fatalf("final file %q, %v", b, err)
	}
	if got := tempNames(t, dir, "x.sofa"); !slices.Equal(got, []string{".x.sofa.tmp-", ".x.sofa.tmp-112233445566", ".x.sofa.tmp-notes.txt"}) {
		t.Errorf("temporary files after commit: %q", got)
	}

	// abort removes the own file too; the held one survives again.
	sink, err = createArchive(path, true)
	if err != nil {
		t.Fatal(err)
	}
	sink.abort()
	if _, err := os.Stat(sink.tmp); err == nil {
		t.Error("abort left its temporary file")
	}
	if _, err := os.Stat(held); err != nil {
		t.Errorf("locked temporary file removed: %v", err)
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
