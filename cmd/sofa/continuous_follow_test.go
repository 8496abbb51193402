package main

import (
	"context"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
)

// TestCLI_ContinuousFollowLines (found by a tester on CouchDB 3.5): once
// a continuous whole-server run followed the source, nothing was printed
// until it stopped, whatever --progress-interval said, and a database
// created on the source showed only in the summary at the end. Now a
// new database is logged when it is copied, a line every interval tells
// the catch-up copies that ended, and one after six quiet intervals says
// nothing changed.
func TestCLI_ContinuousFollowLines(t *testing.T) {
	bin := sofaBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	a, b := couchtest.Start(t), couchtest.Start(t)
	ca := couchtest.NewClient(a.URL)
	if err := ca.CreateDB(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, a, "c1", 2)
	r := startBg(t, ctx, bin, "replicate", "--continuous", "--progress-interval", "100ms", "--poll-interval", "200ms", a.URL, b.URL)
	defer func() { _ = r.cmd.Process.Kill() }()
	r.waitLine(regexp.MustCompile(`initial copy done: 1 database \(1 ok`))
	r.waitLine(regexp.MustCompile(`following: no change copied in the last 600ms; docs_written=0 since the initial copy`))
	if err := ca.CreateDB(ctx, "c2"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, a, "c2", 3)
	r.waitLine(regexp.MustCompile(`c2: created on the source; copied \(docs_written=\d+\)`))
	// c2's three documents may come in more than one catch-up copy
	r.waitLine(regexp.MustCompile(`following: \d+ catch-up cop(y|ies) of 1 database ended \(0 failed\): docs_written=\+\d+; docs_written=3 since the initial copy`))
	_, log := r.stop(syscall.SIGINT)
	if testing.Verbose() {
		t.Log(log)
	}
}
