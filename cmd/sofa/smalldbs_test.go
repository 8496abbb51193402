package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// Small databases (one write each) get no claim and, once copied whole,
// no checkpoint (issue 10): the engine marks each target with its first
// write, and a target that holds neither mark nor claim is recognised
// by its revisions (all known to the source). These tests hold the
// guarantees that the claim gave.

// TestServers_SmallDatabasesInterruptKillResume: a run of many small
// databases is interrupted (SIGINT), its rerun killed (SIGKILL: no final
// checkpoint), and the next run copies every database, each ok and equal:
// no run refuses a database an earlier one half-wrote.
func TestServers_SmallDatabasesInterruptKillResume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PouchDB Servers")
	}
	bin := sofaBin(t)
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	var names []string
	for i := range 120 {
		names = append(names, fmt.Sprintf("small-%03d", i))
	}
	c := src.Client()
	for _, n := range names {
		if err := c.CreateDB(t.Context(), n); err != nil {
			t.Fatal(err)
		}
		if _, err := c.BulkDocs(t.Context(), n, true, raw(`{"_id":"a","v":1}`), raw(`{"_id":"b","v":2}`), raw(`{"_id":"c","_deleted":true}`)); err != nil {
			t.Fatal(err)
		}
	}
	px := faultproxy.StartT(t, tgt.URL)
	if err := px.SetRules(faultproxy.Rule{Name: "slow", Delay: 30 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	args := []string{"replicate", src.URL, px.URL, "--max-dbs", "4", "--json"}

	first := stopPartway(t, bin, args, tgt, len(names), syscall.SIGINT)
	first.want(t, exitInterrupted)
	s1 := first.summary(t)
	t.Logf("interrupted run: %d ok, %d interrupted, %d not started", s1.DBsOK, s1.DBsInterrupted, s1.DBsNotStarted)
	for _, d := range s1.DBs {
		if d.Status == fleet.StatusFailed || d.Status == fleet.StatusPartial {
			t.Errorf("interrupted run: database %s %s: %s", d.Name, d.Status, d.Error)
		}
	}
	killed := stopPartway(t, bin, args, tgt, len(names), syscall.SIGKILL)
	t.Logf("killed run: exit %d; %d of %d databases on the target", killed.code, len(userDBs(allDBs(t, tgt))), len(names))

	px.SetRules()
	last := runSofa(t, bin, args...)
	last.want(t, exitOK)
	s := last.summary(t)
	if s.DBsOK != len(names) {
		t.Errorf("last run: %d of %d ok", s.DBsOK, len(names))
		for _, d := range s.DBs {
			if d.Status != fleet.StatusOK {
				t.Errorf("  %s %s: %s", d.Name, d.Status, d.Error)
			}
		}
	}
	assertCopied(t, src, tgt, names)
}

// stopPartway runs sofa with args and sends sig once more than a quarter
// of the n databases exist on tgt (they are created as the run goes), or
// after the first run's databases when they all exist already; it returns
// the run's outcome.
func stopPartway(t *testing.T, bin string, args []string, tgt *couchtest.Server, n int, sig syscall.Signal) sofaRun {
	t.Helper()
	before := len(userDBs(allDBs(t, tgt)))
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for len(userDBs(allDBs(t, tgt))) < min(n, before+n/4) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no progress after 60 s:\n%s", stderr.String())
		}
		select {
		case err := <-done:
			t.Fatalf("finished before the signal (%v); make the run longer:\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("no exit 60 s after %s:\n%s", sig, stderr.String())
	}
	return sofaRun{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// TestServers_UnclaimedTargets: target databases that hold documents but
// neither checkpoint nor claim. One holding only revisions the source has
// (a run stopped before its mark was stored) is written into and ends
// equal; one holding a revision the source lacks (someone else's data) is
// refused as before, and so is one holding more documents than one write
// leaves unmarked, unless --reuse-existing. A second run then writes
// nothing and reports ok.
func TestServers_UnclaimedTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PouchDB Servers")
	}
	bin := sofaBin(t)
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	ctx := t.Context()
	sc, tc := src.Client(), tgt.Client()
	docs := func(n int) []json.RawMessage {
		var d []json.RawMessage
		for i := range n {
			d = append(d, raw(`{"_id":"d%02d","_rev":"1-%032x","v":%d}`, i, i+1, i))
		}
		return d
	}
	for db, n := range map[string]int{"half": 4, "foreign": 3, "large": 12} {
		if err := sc.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		if _, err := sc.BulkDocs(ctx, db, false, docs(n)...); err != nil {
			t.Fatal(err)
		}
		if err := tc.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	put := func(db string, d ...json.RawMessage) {
		t.Helper()
		if _, err := tc.BulkDocs(ctx, db, false, d...); err != nil {
			t.Fatal(err)
		}
	}
	put("half", docs(4)[:2]...)                                                                // this source's revisions only
	put("foreign", append(docs(1), raw(`{"_id":"d01","_rev":"1-%032x","v":"theirs"}`, 99))...) // d01 1-...63 is not the source's
	put("large", docs(12)...)                                                                  // the source's, but more than one write
	all := []string{"foreign", "half", "large"}
	// One write is 5 revisions here: a target of more documents is not
	// read back.
	args := []string{"replicate", src.URL, tgt.URL, "--write-batch-docs", "5", "--batch-size", "5", "--json"}

	r := runSofa(t, bin, args...)
	r.want(t, exitPartial)
	for _, d := range r.summary(t).DBs {
		switch d.Name {
		case "half":
			if d.Status != fleet.StatusOK {
				t.Errorf("half: %s (%s), want ok", d.Status, d.Error)
			}
		case "foreign", "large":
			if d.Status != fleet.StatusFailed || !strings.Contains(d.Error, "--reuse-existing") {
				t.Errorf("%s: %s %q, want failed: not empty (--reuse-existing)", d.Name, d.Status, d.Error)
			}
		}
	}
	assertCopied(t, src, tgt, []string{"half"})
	if n := docCount(t, tgt, "foreign"); n != 2 {
		t.Errorf("foreign: %d documents on the target, want its 2 untouched", n)
	}

	r = runSofa(t, bin, append(args, "--reuse-existing")...)
	r.want(t, exitOK)
	assertCopied(t, src, tgt, []string{"half", "large"})

	// Everything copied: a second run writes nothing, each database ok.
	rec := startRecorder(t, tgt.URL)
	var mark int
	r = runSofa(t, bin, "replicate", src.URL, withCreds(rec.URL, tgt.URL), "--json")
	r.want(t, exitOK)
	s := r.summary(t)
	if s.DBsOK != len(all) || s.DocsWritten != 0 {
		t.Errorf("second run: %d of %d ok, %d revisions written; want all ok, none written", s.DBsOK, len(all), s.DocsWritten)
	}
	seen := kinds(rec, &mark)
	for _, k := range []string{"PUT /db", "POST /db/_bulk_docs", "PUT /db/doc", "PUT /db/_local"} {
		if c := seen[k]; c != 0 {
			t.Errorf("second run: %s x%d on the target, want none (all: %v)", k, c, seen)
		}
	}
}
