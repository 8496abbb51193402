package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// An interrupted backup counts no database as backed up and no document
// as written: its closing line (and --json) say that no archive was
// written and what had been read; it exits 130 and leaves no file.
func TestCLI_BackupInterruptedNotWritten(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	c := srv.Client()
	for _, db := range []string{"done", "slow"} {
		if err := c.CreateDB(t.Context(), db); err != nil {
			t.Fatal(err)
		}
		cliLoad(t, srv, db, 20)
	}
	// slow's changes feed is held until the run is interrupted
	px := faultproxy.StartT(t, srv.URL)
	if err := px.SetRules(faultproxy.Rule{Path: `^/slow/_changes$`, Delay: 2 * time.Minute, Fault: faultproxy.Forward}); err != nil {
		t.Fatal(err)
	}
	for _, jsonOut := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		dir := t.TempDir()
		args := []string{"backup", "--progress-interval", "100ms", "--include", "done", "--include", "slow", px.URL, filepath.Join(dir, "out.sofa")}
		if jsonOut {
			args = append(args, "--json")
		}
		cmd := exec.CommandContext(ctx, bin, args...)
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		lines := stderrLines(t, cmd)
		all := &strings.Builder{}
		// done read whole, slow held: interrupt
		waitMatch(t, ctx, lines, all, regexp.MustCompile(`msg=progress dbs_done=1 dbs_total=2 `))
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		for l := range lines {
			all.WriteString(l + "\n")
		}
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
			t.Errorf("json=%v: exit %v, want %d:\n%s", jsonOut, err, exitInterrupted, all)
		}
		if files, _ := os.ReadDir(dir); len(files) != 0 {
			t.Errorf("json=%v: %s holds %v after the interrupt, want nothing", jsonOut, dir, files)
		}
		if !jsonOut {
			want := regexp.MustCompile(`(?m)^sofa: no archive written: 2 databases in [0-9.]+s, none kept: 1 read whole, 1 interrupted, 0 failed, 0 not started; docs_read=20 bytes=[0-9]+ \([^)]*\) read; docs_written=0$`)
			if !want.MatchString(all.String()) || strings.Contains(all.String(), " ok, ") {
				t.Errorf("the closing line does not say that nothing was backed up (want %s):\n%s", want, all)
			}
			continue
		}
		var doc struct {
			ArchiveNotWritten bool   `json:"archive_not_written"`
			DBsOK             int    `json:"dbs_ok"`
			DBsNotWritten     int    `json:"dbs_not_written"`
			DBsInterrupted    int    `json:"dbs_interrupted"`
			DocsRead          int64  `json:"docs_read"`
			DocsWritten       int64  `json:"docs_written"`
			Status            string `json:"status"`
			Archive           any    `json:"archive"`
			DBs               []struct {
				Name        string `json:"name"`
				Status      string `json:"status"`
				DocsWritten int64  `json:"docs_written"`
			} `json:"dbs"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
			t.Fatalf("--json: %v:\n%s", err, stdout.String())
		}
		if !doc.ArchiveNotWritten || doc.DBsOK != 0 || doc.DBsNotWritten != 1 || doc.DBsInterrupted != 1 || doc.DocsRead != 20 || doc.DocsWritten != 0 || doc.Status != "interrupted" || doc.Archive != nil {
			t.Errorf("--json: %+v; want archive_not_written, dbs_ok 0, dbs_not_written 1, dbs_interrupted 1, docs_read 20, docs_written 0, no archive", doc)
		}
		for _, d := range doc.DBs {
			if d.DocsWritten != 0 || (d.Name == "done") != (d.Status == "not_written") {
				t.Errorf("--json: database %s: %s, docs_written=%d; want not_written (done), 0", d.Name, d.Status, d.DocsWritten)
			}
		}
	}
}
