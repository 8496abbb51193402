package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
)

// TestCLI_ContinuousRefusedOnce: a continuous whole-server run whose
// initial copy is refused one database ("taken": its target holds
// another document) says so once, not again at each change of the
// source database, and says it was copied after all once its target is
// deleted. Its summaries say what is true: the initial copy's summary
// (and its progress final line) is named as the initial copy's, and the
// final line counts the catch-up copies after it, as the "following"
// lines count them: the initial copy's failure is not among the
// catch-ups that failed (found by a reviewer: "15 catch-up copies (16
// failed)").
//
// The source is polled, and on CouchDB also watched through _db_updates
// (as the reviewer's was).
func TestCLI_ContinuousRefusedOnce(t *testing.T) {
	bin := sofaBin(t)
	t.Run("poll", func(t *testing.T) { continuousRefusedOnce(t, bin, "poll") })
	t.Run("db_updates", func(t *testing.T) {
		couchtest.RequireKind(t, couchtest.CouchDB, "PouchDB Server has no _db_updates")
		continuousRefusedOnce(t, bin, "db_updates")
	})
}

func continuousRefusedOnce(t *testing.T, bin, mode string) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	cs, ct := src.Client(), tgt.Client()
	if mode == "db_updates" {
		// _db_updates needs it (as after _cluster_setup)
		if err := cs.CreateDB(ctx, "_global_changes"); err != nil {
			t.Fatal(err)
		}
	}
	for _, db := range []string{"fine", "taken"} {
		if err := cs.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		cliLoad(t, src, db, 5)
	}
	if err := ct.CreateDB(ctx, "taken"); err != nil {
		t.Fatal(err)
	}
	if _, err := ct.PutDoc(ctx, "taken", "theirs", map[string]any{"a": 1}); err != nil {
		t.Fatal(err)
	}
	put := func(db, id string) {
		t.Helper()
		if _, err := cs.PutDoc(ctx, db, id, map[string]any{"at": time.Now().UnixNano()}); err != nil {
			t.Fatal(err)
		}
	}
	r := startBg(t, ctx, bin, "replicate", "--continuous", "--poll-interval", "200ms", "--progress-interval", "250ms", src.URL, tgt.URL)
	r.waitLine(regexp.MustCompile(`msg="progress final" .*dbs_total=2 .*phase=initial_copy`))
	r.waitLine(regexp.MustCompile(`initial copy done: 2 databases \(1 ok, 0 partial, 1 failed\); following the source \(` + mode + `\)`))
	// The catch-ups of the loads above (the watch started before the
	// initial copy) end first: a write made while the refused copy of
	// taken runs waits for the next write (as the log said: "skipped
	// until it changes again"), and would leave no line to wait for.
	r.waitLine(regexp.MustCompile(`following: no change copied`))
	for i := range 2 {
		put("taken", fmt.Sprintf("more%d", i))
		r.waitLine(regexp.MustCompile(`following: \d+ catch-up cop(y|ies) of 1 database ended \([1-9]\d* failed\)`))
	}
	put("fine", "more")
	r.waitLine(regexp.MustCompile(`following: \d+ catch-up cop(y|ies) of 1 database ended \(0 failed\)`))
	if err := ct.DeleteDB(ctx, "taken"); err != nil {
		t.Fatal(err)
	}
	put("taken", "last")
	r.waitLine(regexp.MustCompile(`taken: copied after all \(docs_written=8\): its target database is no longer refused`))
	// quiet from here on: every catch-up copy is in a "following" line
	r.waitLine(regexp.MustCompile(`following: no change copied`))
	code, out := r.stop(syscall.SIGINT)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d:\n%s", code, exitInterrupted, out)
	}
	if n := strings.Count(out, "taken: target database exists and is not empty"); n != 1 {
		t.Errorf("the refusal of taken said %d times, want once:\n%s", n, out)
	}
	for _, want := range []string{"sofa: initial copy: 2 databases in ", `sofa: initial copy: database "taken": failed: target database exists and is not empty`} {
		if !strings.Contains(out, want) {
			t.Errorf("no line %q:\n%s", want, out)
		}
	}
	var copies, failed int
	for _, m := range regexp.MustCompile(`following: (\d+) catch-up cop(?:y|ies) of \d+ databases? ended \((\d+) failed\)`).FindAllStringSubmatch(out, -1) {
		c, _ := strconv.Atoi(m[1])
		f, _ := strconv.Atoi(m[2])
		copies, failed = copies+c, failed+f
	}
	final := regexp.MustCompile(`continuous \(` + mode + `\) for \d+s: (\d+) catch-up cop(?:y|ies) after the initial copy \((\d+) failed\)`).FindStringSubmatch(out)
	if final == nil || final[1] != strconv.Itoa(copies) || final[2] != strconv.Itoa(failed) || failed < 2 {
		t.Errorf("final line %q, want the %d catch-up copies (%d failed, 2 or more) of the following lines:\n%s", final, copies, failed, out)
	}
}
