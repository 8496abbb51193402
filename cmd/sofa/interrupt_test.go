package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// An interrupted backup says what an operator can do: nothing was
// written under the archive's name, and the rerun starts over (a backup
// is not resumed); exit 130. The source hangs on `_changes` (canned
// answers) so the interruption always lands mid-backup.
func TestBackup_InterruptedSaysStartOver(t *testing.T) {
	bin := sofaBin(t)
	inChanges := make(chan struct{}) // closed when the backup is reading _changes
	var once sync.Once
	src := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/":
			io.WriteString(w, `{"express-pouchdb":"Welcome!","version":"4.2.0","uuid":"u1"}`)
		case r.URL.Path == "/_all_dbs":
			io.WriteString(w, `["a"]`)
		case r.URL.Path == "/a":
			io.WriteString(w, `{"db_name":"a","doc_count":1,"doc_del_count":0,"update_seq":1,"instance_start_time":"0"}`)
		case strings.HasSuffix(r.URL.Path, "/_changes"):
			once.Do(func() { close(inChanges) })
			<-r.Context().Done() // hangs until the client goes away
		default:
			w.WriteHeader(404)
			io.WriteString(w, `{"error":"not_found","reason":"missing"}`)
		}
	})
	path := filepath.Join(t.TempDir(), "b.sofa")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "backup", src, path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inChanges: // mid-backup: the interruption lands there
	case <-ctx.Done():
		t.Fatal("the backup never read _changes")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit %d, want %d\n%s", code, exitInterrupted, stderr.String())
	}
	if !strings.Contains(stderr.String(), "no archive was written (a backup starts over when run again)") || strings.Contains(stderr.String(), "resume") {
		t.Errorf("stderr does not say the backup starts over:\n%s", stderr.String())
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("an interrupted backup left a file under the archive's name")
	}
}
