package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/internal/limit"
	"github.com/sofadb/sofa/replicate"
)

// Whole-server replication (issue 4), end to end: the sofa binary against
// PouchDB Server, checked with couchtest's independent equality oracle.

type sofaRun struct {
	code           int
	stdout, stderr string
}

// runSofa runs the binary to completion (at most 3 minutes).
func runSofa(t *testing.T, bin string, args ...string) sofaRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("sofa %s: %v", strings.Join(args, " "), err)
	}
	return sofaRun{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

func (r sofaRun) summary(t *testing.T) fleet.Summary {
	t.Helper()
	var s fleet.Summary
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("summary is not JSON (%v):\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	return s
}

func (r sofaRun) want(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, clipOut(r.stdout), clipOut(r.stderr))
	}
}

func clipOut(s string) string {
	if len(s) > 6000 {
		return s[:3000] + "\n...\n" + s[len(s)-3000:]
	}
	return s
}

func raw(format string, args ...any) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(format, args...))
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// A 1x1 PNG.
var tinyPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")

// fixtureCase is one case of docs/conformance.md, scaled down: the
// documents of one database, written with new_edits true or false.
type fixtureCase struct {
	name     string
	newEdits bool
	docs     func() []json.RawMessage
}

var fixtureCases = []fixtureCase{
	{"plain", false, func() []json.RawMessage {
		var d []json.RawMessage
		for i := range 5 {
			d = append(d, raw(`{"_id":"doc-%d","_rev":"1-a%d","n":%d,"f":1.25,"s":"é<>&"}`, i, i, i))
		}
		return d
	}},
	{"A1", true, func() []json.RawMessage { // 1 KB text attachment among 10 docs
		d := []json.RawMessage{raw(`{"_id":"att","_attachments":{"note.txt":{"content_type":"text/plain","data":%q}}}`, b64(bytes.Repeat([]byte("sofa "), 205)))}
		for i := range 10 {
			d = append(d, raw(`{"_id":"p%d","i":%d}`, i, i))
		}
		return d
	}},
	{"A2", true, func() []json.RawMessage { // random bytes (scaled to 200 KB) and a PNG
		return []json.RawMessage{
			raw(`{"_id":"random","_attachments":{"r.bin":{"content_type":"application/octet-stream","data":%q}}}`, b64(randBytes(200<<10))),
			raw(`{"_id":"image","_attachments":{"i.png":{"content_type":"image/png","data":%q}}}`, b64(tinyPNG)),
		}
	}},
	{"E2", true, func() []json.RawMessage {
		return []json.RawMessage{raw(`{"_id":"a+b"}`), raw(`{"_id":"a b"}`), raw(`{"_id":"a%%2Bb"}`), raw(`{"_id":"123+456"}`)}
	}},
	{"E3", true, func() []json.RawMessage {
		return []json.RawMessage{raw(`{"_id":"folder/file"}`), raw(`{"_id":"a/b/c"}`),
			raw(`{"_id":"_design/app","views":{"by_id":{"map":"function(d){emit(d._id)}"}}}`), raw(`{"_id":"_design/with/slash"}`)}
	}},
	{"E4", true, func() []json.RawMessage { // a 20,000-character id among 10 docs
		d := []json.RawMessage{raw(`{"_id":%q}`, strings.Repeat("L", 20000))}
		for i := range 10 {
			d = append(d, raw(`{"_id":"n%d"}`, i))
		}
		return d
	}},
	{"R1", false, func() []json.RawMessage { // long live branch, shorter deleted branch
		return []json.RawMessage{
			raw(`{"_id":"r1","_rev":"5-e","v":5,"_revisions":{"start":5,"ids":["e","d","c","b","a"]}}`),
			raw(`{"_id":"r1","_rev":"3-y","_deleted":true,"_revisions":{"start":3,"ids":["y","x","a"]}}`),
		}
	}},
	{"R2", false, func() []json.RawMessage { // conflicting leaves (scaled to 5), each with an attachment
		var d []json.RawMessage
		for i := range 5 {
			d = append(d, raw(`{"_id":"c","_rev":"2-h%d","leaf":%d,"_revisions":{"start":2,"ids":["h%d","root"]},"_attachments":{"leaf%d.bin":{"content_type":"application/octet-stream","revpos":2,"data":%q}}}`,
				i, i, i, i, b64(randBytes(1024))))
		}
		return d
	}},
	{"R4", false, func() []json.RawMessage { // a tombstone keeping body fields
		return []json.RawMessage{raw(`{"_id":"r4","_rev":"2-d","_deleted":true,"kept":"field","n":[1,2],"_revisions":{"start":2,"ids":["d","a"]}}`)}
	}},
}

// s1Security is case S1: admins and members, members only, empty.
var s1Security = map[string]any{
	"a$b":   couchtest.Security{Admins: couchtest.Group{Names: []string{"ann"}, Roles: []string{"ops"}}, Members: couchtest.Group{Names: []string{"bob"}, Roles: []string{"staff"}}},
	"a(b)":  map[string]any{"members": map[string]any{"names": []string{"carl"}, "roles": []string{}}},
	"a-b_c": map[string]any{},
}

// loadServer creates the databases on srv, database i holding fixture
// case i mod len(fixtureCases), 8 at a time.
func loadServer(t *testing.T, srv *couchtest.Server, names []string) {
	t.Helper()
	c := srv.Client()
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	sem := make(chan struct{}, 8)
	for i, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			fc := fixtureCases[i%len(fixtureCases)]
			if err := c.CreateDB(t.Context(), name); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				return
			}
			if _, err := c.BulkDocs(t.Context(), name, fc.newEdits, fc.docs()...); err != nil {
				errs <- fmt.Errorf("%s (%s): %w", name, fc.name, err)
				return
			}
			if sec, ok := s1Security[name]; ok {
				if err := c.PutSecurity(t.Context(), name, sec); err != nil {
					errs <- fmt.Errorf("%s: _security: %w", name, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// assertCopied compares every named database of src with its namesake on
// tgt, 8 at a time, _security included.
func assertCopied(t *testing.T, src, tgt *couchtest.Server, names []string) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	sem := make(chan struct{}, 8)
	for _, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			d, err := couchtest.CompareDBs(t.Context(), src.DBURL(name), tgt.DBURL(name),
				couchtest.CompareOptions{Security: true, RevsLimit: true, PouchDBRevpos: true})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("%s: compare: %v", name, err)
			case !d.Equal():
				t.Errorf("%s: %s", name, d)
			}
		})
	}
	wg.Wait()
}

func allDBs(t *testing.T, srv *couchtest.Server) []string {
	t.Helper()
	var names []string
	if err := srv.Client().GetJSON(t.Context(), "/_all_dbs", &names); err != nil {
		t.Fatal(err)
	}
	return names
}

// userDBs drops PouchDB Server's own databases (names starting with _).
func userDBs(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return strings.HasPrefix(n, "_") })
}

// mixedNames are 200 database names: case E1's three, three to exclude,
// and 194 others.
func mixedNames() (all, copied []string) {
	all = []string{"a$b", "a(b)", "a-b_c", "skip-0", "skip-1", "skip-2"}
	for i := len(all); i < 200; i++ {
		all = append(all, fmt.Sprintf("mix-%03d", i))
	}
	for _, n := range all {
		if !strings.HasPrefix(n, "skip-") {
			copied = append(copied, n)
		}
	}
	return all, copied
}

// TestServers_200MixedDatabases is issue 4 point 6 (contents, names,
// include and exclude, _security) and the verify verb on its result.
func TestServers_200MixedDatabases(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three PouchDB Servers and copies 200 databases")
	}
	bin := sofaBin(t)
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	all, copied := mixedNames()
	loadServer(t, src, all)

	t0 := time.Now()
	r := runSofa(t, bin, "replicate", src.URL, tgt.URL, "--exclude", "skip-*", "--verify", "full", "--json")
	r.want(t, exitOK)
	t.Logf("200 databases (197 copied) in %s", time.Since(t0).Round(time.Millisecond))
	sum := r.summary(t)
	if sum.DBsTotal != len(copied) || sum.DBsOK != len(copied) || !sum.Complete() {
		t.Errorf("summary: %d databases, %d ok; want %d ok", sum.DBsTotal, sum.DBsOK, len(copied))
	}
	got := userDBs(allDBs(t, tgt))
	sort.Strings(got)
	want := slices.Clone(copied)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("target databases:\n got %v\nwant %v", got, want)
	}
	assertCopied(t, src, tgt, copied)
	if t.Failed() {
		return
	}

	// A second run copies nothing.
	r = runSofa(t, bin, "replicate", src.URL, tgt.URL, "--exclude", "skip-*", "--json")
	r.want(t, exitOK)
	if s := r.summary(t); s.DocsWritten != 0 {
		t.Errorf("second run wrote %d revisions, want 0", s.DocsWritten)
	}

	// verify: equal when filtered the same way; the excluded databases are
	// differences otherwise.
	r = runSofa(t, bin, "verify", src.URL, tgt.URL, "--exclude", "skip-*", "--full", "--json")
	r.want(t, exitOK)
	var vr verifyResult
	if err := json.Unmarshal([]byte(r.stdout), &vr); err != nil || !vr.Equal || vr.DBsEqual != len(copied) {
		t.Errorf("verify --full: %v %+v", err, vr)
	}
	r = runSofa(t, bin, "verify", src.URL, tgt.URL)
	r.want(t, exitDifferent)
	for _, n := range []string{"skip-0", "skip-1", "skip-2"} {
		if !strings.Contains(r.stderr, fmt.Sprintf("database %q", n)) {
			t.Errorf("verify did not list %s:\n%s", n, r.stderr)
		}
	}

	// verify lists each difference by database, id and rev.
	c := tgt.Client()
	if _, err := c.BulkDocs(t.Context(), "a(b)", false, raw(`{"_id":"extra-leaf","_rev":"1-zz"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Client().BulkDocs(t.Context(), "mix-010", false, raw(`{"_id":"late","_rev":"1-ll"}`)); err != nil {
		t.Fatal(err)
	}
	r = runSofa(t, bin, "verify", src.URL, tgt.URL, "--exclude", "skip-*")
	r.want(t, exitDifferent)
	for _, s := range []string{`database "a(b)"`, `extra id="extra-leaf"`, `database "mix-010"`, `missing id="late"`, "2 of 197 databases differ"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("verify output lacks %q:\n%s", s, r.stderr)
		}
	}
	r = runSofa(t, bin, "verify", src.URL+"/a%28b%29", tgt.URL+"/a%28b%29", "--full")
	r.want(t, exitDifferent)

	// --include selects by glob; names with $ ( ) reach the right database.
	tgt2 := couchtest.Start(t)
	r = runSofa(t, bin, "replicate", src.URL, tgt2.URL, "--include", "a*", "--exclude", "a-*", "-q")
	r.want(t, exitOK)
	got = userDBs(allDBs(t, tgt2))
	sort.Strings(got)
	if want := []string{"a$b", "a(b)"}; !slices.Equal(got, want) {
		t.Errorf("--include a* --exclude a-*: target holds %v, want %v", got, want)
	}
	assertCopied(t, src, tgt2, []string{"a$b", "a(b)"})
}

// TestServers_VerifyRetriesAndReports covers --verify: a copy that lost
// documents behind its checkpoint is found by the cheap check and repaired
// by the one retry; a difference the copy cannot repair is reported per
// document (exit 3).
func TestServers_VerifyRetriesAndReports(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PouchDB Server")
	}
	bin := sofaBin(t)
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	// Both "plain" (case 0): doc-0..doc-4 at revs 1-a0..1-a4.
	loadServer(t, src, []string{"lost"})
	loadServer(t, src, []string{"clash"})
	// Batches of 2 rows: more than one write, so the checkpoint at the
	// end is written (a database copied in one write keeps none).
	r := runSofa(t, bin, "replicate", src.URL, tgt.URL, "--include", "lost", "--batch-size", "2", "--json")
	r.want(t, exitOK)

	// Lose the target's documents but keep its checkpoint: a resumed run
	// copies nothing, and only verification notices.
	ctx := t.Context()
	sep, err := couch.Probe(ctx, src.URL, couch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tep, err := couch.Probe(ctx, tgt.URL, couch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	si, err := sep.Server.DB("lost").Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ti, err := tep.Server.DB("lost").Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := replicate.ReplicationID(si.Identity, ti.Identity)
	var ckpt map[string]any
	if err := tgt.Client().GetJSON(ctx, "/lost/_local/"+url.PathEscape(id), &ckpt); err != nil {
		t.Fatalf("target checkpoint: %v", err)
	}
	delete(ckpt, "_rev")
	if err := tgt.Client().DeleteDB(ctx, "lost"); err != nil {
		t.Fatal(err)
	}
	if err := tgt.Client().CreateDB(ctx, "lost"); err != nil {
		t.Fatal(err)
	}
	if err := tgt.Client().PutJSON(ctx, "/lost/_local/"+url.PathEscape(id), ckpt, nil); err != nil {
		t.Fatal(err)
	}

	r = runSofa(t, bin, "replicate", src.URL, tgt.URL, "--include", "lost", "--json", "-v")
	r.want(t, exitOK)
	if !strings.Contains(r.stderr, "copying it once more") {
		t.Errorf("no retry logged:\n%s", r.stderr)
	}
	if s := r.summary(t); s.DocsWritten != 5 {
		t.Errorf("docs_written = %d, want 5 (by the retry)", s.DocsWritten)
	}
	assertCopied(t, src, tgt, []string{"lost"})

	// The target already holds doc-1 at the source's rev with another
	// body: no copy can fix that, so it is reported.
	if err := tgt.Client().CreateDB(ctx, "clash"); err != nil {
		t.Fatal(err)
	}
	if _, err := tgt.Client().BulkDocs(ctx, "clash", false, raw(`{"_id":"doc-1","_rev":"1-a1","n":999}`)); err != nil {
		t.Fatal(err)
	}
	r = runSofa(t, bin, "replicate", src.URL, tgt.URL, "--include", "clash", "--reuse-existing", "--verify", "full", "--json")
	r.want(t, exitPartial)
	s := r.summary(t)
	if s.DBsPartial != 1 || len(s.DBs) != 1 {
		t.Fatalf("summary: %+v", s)
	}
	f := s.DBs[0].Failures
	if len(f) != 1 || f[0].ID != "doc-1" || f[0].Rev != "1-a1" || f[0].Error != "verify_body" {
		t.Errorf("failures = %+v, want doc-1 1-a1 verify_body", f)
	}
	r = runSofa(t, bin, "replicate", src.URL, tgt.URL, "--include", "clash", "--reuse-existing", "--verify", "sometimes")
	r.want(t, exitUsage)
}

// TestServers_InterruptAndResume: SIGINT mid-run gives exit 130; the same
// command then completes and the copies are equal, without copying again
// what the first run finished.
func TestServers_InterruptAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PouchDB Server")
	}
	bin := sofaBin(t)
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	var names []string
	for i := range 40 {
		names = append(names, fmt.Sprintf("db-%02d", i))
	}
	c := src.Client()
	var total int64
	for _, n := range names {
		if err := c.CreateDB(t.Context(), n); err != nil {
			t.Fatal(err)
		}
		var docs []json.RawMessage
		for j := range 200 {
			docs = append(docs, raw(`{"_id":"d%03d","v":%d,"pad":%q}`, j, j, strings.Repeat("x", 200)))
		}
		if _, err := c.BulkDocs(t.Context(), n, true, docs...); err != nil {
			t.Fatal(err)
		}
		total += 200
	}
	// Slow the target down so the run lasts long enough to be interrupted.
	px := faultproxy.StartT(t, tgt.URL)
	if err := px.SetRules(faultproxy.Rule{Name: "slow", Delay: 30 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	args := []string{"replicate", src.URL, px.URL, "--max-dbs", "3", "--batch-size", "50", "--json"}
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	// Interrupt once some database is partly copied (or, should polling
	// miss that, once a quarter of them exist).
	for !partlyCopied(t, tgt, 200) && len(userDBs(allDBs(t, tgt))) < len(names)/4 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no progress after 60 s:\n%s", stderr.String())
		}
		select {
		case err := <-done:
			t.Fatalf("finished before the interrupt (%v); make the run longer", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("no exit 60 s after SIGINT:\n%s", stderr.String())
	}
	first := sofaRun{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	first.want(t, exitInterrupted)
	s1 := first.summary(t)
	if !s1.Interrupted || s1.DBsOK == len(names) || s1.DocsWritten == 0 {
		t.Errorf("interrupted run: interrupted=%t ok=%d docs_written=%d", s1.Interrupted, s1.DBsOK, s1.DocsWritten)
	}
	t.Logf("interrupted after %d ok, %d interrupted, %d not started; %d of %d docs written",
		s1.DBsOK, s1.DBsInterrupted, s1.DBsNotStarted, s1.DocsWritten, total)
	for _, d := range s1.DBs {
		if d.Status == fleet.StatusFailed || d.Status == fleet.StatusPartial {
			t.Errorf("interrupted run: database %s %s (want ok, interrupted or not_started): %s", d.Name, d.Status, d.Error)
		}
	}

	px.SetRules()
	second := runSofa(t, bin, args...)
	second.want(t, exitOK)
	s2 := second.summary(t)
	t.Logf("resumed run: %d revisions checked (missing_checked), %d written", s2.MissingChecked, s2.DocsWritten)
	if s2.DBsOK != len(names) {
		t.Errorf("resumed run: %d of %d ok", s2.DBsOK, len(names))
	}
	// Databases the first run finished are resumed from their checkpoints:
	// their documents are not even checked again.
	if left := total - 200*int64(s1.DBsOK); s2.MissingChecked > left {
		t.Errorf("resumed run checked %d revisions, want at most the %d of the databases not finished", s2.MissingChecked, left)
	}
	// _revs_diff never rewrites, and a write in flight at the interrupt is
	// acknowledged before the first run exits: each revision is counted
	// by exactly one run.
	if s1.DocsWritten+s2.DocsWritten != total {
		t.Errorf("docs_written %d + %d, want the %d there are", s1.DocsWritten, s2.DocsWritten, total)
	}
	assertCopied(t, src, tgt, names)
}

// partlyCopied reports whether some database on srv holds more than none
// and fewer than full documents.
func partlyCopied(t *testing.T, srv *couchtest.Server, full int64) bool {
	for _, n := range userDBs(allDBs(t, srv)) {
		var info struct {
			DocCount int64 `json:"doc_count"`
		}
		if err := srv.Client().GetJSON(t.Context(), "/"+couchtest.EscapeDB(n), &info); err != nil {
			continue // created but not ready yet
		}
		if info.DocCount > 0 && info.DocCount < full {
			return true
		}
	}
	return false
}

// TestServers_AdaptsTo429Proxy: the target answers 429 once more than K
// requests are in flight. The run completes, and over its second half the
// target's limit lies in [0.7K, K] (median, time-weighted, from the JSON
// summary's hosts[].timeline). The latency signal is off
// (--latency-tolerance -1), as in its fleet twin: on a loaded machine the
// servers' latency swings for reasons other than their capacity and
// would pull the limit below 0.7K; this test is about 429s, latency
// decisions have their own deterministic tests (internal/limit).
func TestServers_AdaptsTo429Proxy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PouchDB Server")
	}
	const k = 12
	bin := sofaBin(t)
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	var names []string
	for i := range 120 {
		names = append(names, fmt.Sprintf("k-%03d", i))
	}
	c := src.Client()
	for _, n := range names {
		if err := c.CreateDB(t.Context(), n); err != nil {
			t.Fatal(err)
		}
		var docs []json.RawMessage
		for j := range 100 {
			docs = append(docs, raw(`{"_id":"d%03d","v":%d}`, j, j))
		}
		if _, err := c.BulkDocs(t.Context(), n, true, docs...); err != nil {
			t.Fatal(err)
		}
	}
	px := faultproxy.StartT(t, tgt.URL)
	px.SetLimits(faultproxy.Limits{MaxInFlight: k})
	// A little latency, as over a network, so requests overlap.
	if err := px.SetRules(faultproxy.Rule{Name: "rtt", Delay: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	r := runSofa(t, bin, "replicate", src.URL, px.URL, "--batch-size", "20", "--latency-tolerance", "-1", "--json")
	r.want(t, exitOK)
	sum := r.summary(t)
	ps := px.Stats()
	host := strings.TrimPrefix(px.URL, "http://")
	i := slices.IndexFunc(sum.Hosts, func(h limit.Stats) bool { return h.Host == host })
	if i < 0 {
		t.Fatalf("no host %s in summary", host)
	}
	h := sum.Hosts[i]
	start := sum.Started
	mid := start.Add(time.Duration(sum.Duration) / 2)
	end := start.Add(time.Duration(sum.Duration))
	// The limit is an integer step function, so its time-weighted median
	// is an integer; the timeline's interval means approximate it.
	medMean, covered := timelineMedian(h.Timeline, mid, end)
	med := math.Round(medMean)
	t.Logf("%d dbs in %s; proxy: %d requests, %d throttled (429), max %d in flight; limiter: limit %d (min %d, max %d), %d overloads, %d decisions (+%d dropped); median limit over the second half %.0f (interval mean %.2f; %.2fs covered)",
		len(names), time.Duration(sum.Duration).Round(time.Millisecond), ps.Requests, ps.Throttled, ps.MaxInFlight,
		h.Limit, h.MinLimit, h.MaxLimit, h.Overloads, len(h.Decisions), h.DecisionsDropped, med, medMean, covered)
	if sum.DBsOK != len(names) {
		t.Errorf("%d of %d databases ok", sum.DBsOK, len(names))
	}
	if ps.Throttled == 0 {
		t.Errorf("the proxy never answered 429: the run did not reach K=%d in flight", k)
	}
	if lo := 0.7 * k; med < lo || med > k {
		t.Errorf("median limit over the second half = %.0f, want in [%.1f, %d]", med, lo, k)
		for _, d := range h.Decisions {
			t.Logf("  %s %s %d -> %d (%d in flight) %s", d.Time.Sub(start).Round(time.Millisecond), d.Reason, d.From, d.To, d.InFlight, d.Detail)
		}
	}
	if covered < 0.9*end.Sub(mid).Seconds() {
		t.Errorf("timeline covers %.2fs of the second half (%.2fs)", covered, end.Sub(mid).Seconds())
	}
	assertCopied(t, src, tgt, names[:10])
}

// timelineMedian is the time-weighted median of the spans' mean limits
// over [from, to], and the seconds of that window the spans cover.
func timelineMedian(spans []limit.LimitSpan, from, to time.Time) (float64, float64) {
	type w struct{ v, sec float64 }
	var ws []w
	var total float64
	for _, s := range spans {
		ss := s.Start
		se := ss.Add(time.Duration(s.Seconds * float64(time.Second)))
		lo, hi := maxTime(ss, from), minTime(se, to)
		if !hi.After(lo) {
			continue
		}
		sec := hi.Sub(lo).Seconds()
		ws = append(ws, w{s.Mean, sec})
		total += sec
	}
	if total == 0 {
		return 0, 0
	}
	slices.SortFunc(ws, func(a, b w) int {
		switch {
		case a.v < b.v:
			return -1
		case a.v > b.v:
			return 1
		}
		return 0
	})
	acc := 0.0
	for _, x := range ws {
		acc += x.sec
		if acc >= total/2 {
			return x.v, total
		}
	}
	return ws[len(ws)-1].v, total
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// TestServers_RequestsPerDatabase pins the requests a whole-server copy
// needs per database, by kind, as counted by recording proxies in front
// of both servers (and checks that sofa's own requests_by_kind agrees):
// on a first run the source serves `GET /db`, `_security` and `_changes`
// and is never written to (target-only checkpoints, the default); the
// target gets `PUT /db` (no `GET /db` first: it did not list the
// database), `_bulk_docs` (carrying the engine's mark: every database
// here is small, so neither a claim nor a checkpoint is written), `GET
// /db` for the count check, and `PUT _security` only where the source's
// differs from a new database's default (read once). A rerun creates
// nothing and writes no document nor `_local` one: it finds the mark,
// reads each source's feed again (one batch) and asks `_revs_diff` on
// both sides (the mark's anchor on the source); it reads the target's
// `_security` (and `_revs_limit` where the server has it), equal to the
// source's, and writes neither. --checkpoints both also checkpoints on
// the source.
func TestServers_RequestsPerDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PouchDB Servers")
	}
	bin := sofaBin(t)
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	names := []string{"a$b", "a(b)", "a-b_c"} // S1: two non-default _security objects, one {}
	for i := range 17 {
		names = append(names, fmt.Sprintf("plain-%02d", i))
	}
	loadServer(t, src, names)
	n := int64(len(names))
	srcRec, tgtRec := startRecorder(t, src.URL), startRecorder(t, tgt.URL)
	srcURL, tgtURL := withCreds(srcRec.URL, src.URL), withCreds(tgtRec.URL, tgt.URL)
	var srcMark, tgtMark int

	r := runSofa(t, bin, "replicate", srcURL, tgtURL, "--json")
	r.want(t, exitOK)
	sum := r.summary(t)
	seen := map[string]map[string]int64{"source": kinds(srcRec, &srcMark), "target": kinds(tgtRec, &tgtMark)}
	// _revs_limit is read per database where the server has the route
	// (CouchDB); PouchDB Server answers the first read 404 and is not
	// asked again. None is written: every source database has the
	// default, which a database sofa has just created holds.
	// _security is written where the source's differs from a new
	// database's default: on PouchDB Server that is {}, so the two S1
	// objects; on CouchDB 3 a new database is admin-only, so the one
	// set to {} (public) differs too and must be written.
	revsLimitReads, securityPuts := int64(1), int64(2)
	// Database infos (the source's before each copy, the target's for
	// the count check) go through _dbs_info where the server has it
	// (CouchDB), batched across the databases in flight: no GET /db and
	// at most one _dbs_info per database; else one GET /db each.
	infoGets := n
	if src.Kind == couchtest.CouchDB {
		revsLimitReads, securityPuts, infoGets = n, 3, 0
		for _, side := range []string{"source", "target"} {
			if c := seen[side]["POST /_dbs_info"]; c < 1 || c > n {
				t.Errorf("first run: %s: POST /_dbs_info x%d, want 1..%d", side, c, n)
			}
		}
	}
	wantKinds(t, "first run: source", seen["source"], map[string]int64{
		"GET /db": infoGets, "GET /db/_changes": n, "GET /db/_security": n, "GET /db/_revs_limit": revsLimitReads})
	wantKinds(t, "first run: target", seen["target"], map[string]int64{
		"PUT /db": n, "PUT /db/_local": 0, "POST /db/_bulk_docs": n, "GET /db": infoGets,
		"PUT /db/_security": securityPuts, "GET /db/_security": 1, "PUT /db/_revs_limit": 0})
	for k, c := range seen["source"] {
		if !strings.HasPrefix(k, "GET ") && k != "POST /db/_revs_diff" && k != "POST /db/_bulk_get" && k != "POST /_dbs_info" {
			t.Errorf("first run wrote to the source: %s x%d", k, c)
		}
	}
	for _, side := range []string{"source", "target"} {
		if !maps.Equal(sum.RequestsByKind[side], seen[side]) {
			t.Errorf("first run: sofa's requests_by_kind for the %s %v, the proxy saw %v", side, sum.RequestsByKind[side], seen[side])
		}
	}
	assertCopied(t, src, tgt, names)

	r = runSofa(t, bin, "replicate", srcURL, tgtURL, "--json")
	r.want(t, exitOK)
	sum = r.summary(t)
	seen = map[string]map[string]int64{"source": kinds(srcRec, &srcMark), "target": kinds(tgtRec, &tgtMark)}
	if sum.DocsWritten != 0 || sum.DBsOK != len(names) {
		t.Errorf("rerun: %d ok, %d revisions written; want %d ok, 0 written", sum.DBsOK, sum.DocsWritten, len(names))
	}
	// The target's infos: before the copy and for the count check. Its
	// _security and _revs_limit (CouchDB's) are read, equal to the
	// source's, and not written again.
	revsLimitTargetReads := int64(0)
	if src.Kind == couchtest.CouchDB {
		revsLimitTargetReads = n
	}
	wantKinds(t, "rerun: source", seen["source"], map[string]int64{
		"GET /db": infoGets, "GET /db/_changes": n, "GET /db/_security": n, "GET /db/_revs_limit": revsLimitReads,
		"POST /db/_revs_diff": n, "PUT /db/_local": 0})
	wantKinds(t, "rerun: target", seen["target"], map[string]int64{
		"PUT /db": 0, "POST /db/_bulk_docs": 0, "PUT /db/doc": 0, "PUT /db/_local": 0, "GET /db/_local": n,
		"POST /db/_revs_diff": n, "GET /db": 2 * infoGets, "PUT /db/_security": 0, "GET /db/_security": n,
		"PUT /db/_revs_limit": 0, "GET /db/_revs_limit": revsLimitTargetReads})
	for _, side := range []string{"source", "target"} {
		if !maps.Equal(sum.RequestsByKind[side], seen[side]) {
			t.Errorf("rerun: sofa's requests_by_kind for the %s %v, the proxy saw %v", side, sum.RequestsByKind[side], seen[side])
		}
	}
	if src.Kind == couchtest.CouchDB {
		if c := seen["target"]["POST /_dbs_info"]; c < 1 || c > 2*n {
			t.Errorf("rerun: target: POST /_dbs_info x%d, want 1..%d", c, 2*n)
		}
	}

	tgt2 := couchtest.Start(t)
	r = runSofa(t, bin, "replicate", srcURL, tgt2.URL, "--checkpoints", "both", "--json")
	r.want(t, exitOK)
	if c := kinds(srcRec, &srcMark)["PUT /db/_local"]; c != n {
		t.Errorf("--checkpoints both: %d checkpoints written on the source, want %d", c, n)
	}
	r = runSofa(t, bin, "replicate", src.URL, tgt2.URL, "--checkpoints", "sometimes")
	r.want(t, exitUsage)
}

// kinds counts the requests rec logged since *mark by kind (see
// requestKind) and moves *mark past them.
func kinds(rec *recorder, mark *int) map[string]int64 {
	log := rec.requests()
	out := map[string]int64{}
	for _, e := range log[*mark:] {
		out[requestKind(e.Method, e.Path)]++
	}
	*mark = len(log)
	return out
}

// requestKind is the method and path with the database, document and
// attachment names replaced: "GET /db/_changes", "PUT /db/_local", "GET
// /db/doc/attachment".
func requestKind(method, path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case path == "/" || path == "":
		return method + " /"
	case strings.HasPrefix(segs[0], "_"):
		return method + " /" + segs[0]
	case len(segs) == 1:
		return method + " /db"
	case strings.HasPrefix(segs[1], "_"):
		return method + " /db/" + segs[1]
	case len(segs) == 2:
		return method + " /db/doc"
	}
	return method + " /db/doc/attachment"
}

// wantKinds checks the counts of the kinds named in want.
func wantKinds(t *testing.T, what string, got, want map[string]int64) {
	t.Helper()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %s x%d, want %d (all: %v)", what, k, got[k], w, got)
		}
	}
}

// A source database deleted and recreated between two runs is copied
// again from its beginning; the documents the target got from the old one
// stay (replication never deletes), and the summary says so for that
// database (JSON warnings, "ok with warnings" in the text summary).
func TestServers_RecreatedSourceWarns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PouchDB Servers")
	}
	bin := sofaBin(t)
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	c := src.Client()
	ctx := t.Context()
	for _, db := range []string{"re", "same"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		if _, err := c.BulkDocs(ctx, db, true, raw(`{"_id":"a"}`), raw(`{"_id":"b"}`), raw(`{"_id":"c"}`)); err != nil {
			t.Fatal(err)
		}
	}
	runSofa(t, bin, "replicate", src.URL, tgt.URL, "-q").want(t, exitOK)
	if err := c.DeleteDB(ctx, "re"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateDB(ctx, "re"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BulkDocs(ctx, "re", true, raw(`{"_id":"fresh"}`)); err != nil {
		t.Fatal(err)
	}
	r := runSofa(t, bin, "replicate", src.URL, tgt.URL, "--json")
	r.want(t, exitOK)
	for _, d := range r.summary(t).DBs {
		switch {
		case d.Name == "re" && (len(d.Warnings) == 0 || !strings.Contains(strings.Join(d.Warnings, " "), "recreated")):
			t.Errorf("re: warnings %q, want one about the recreated database", d.Warnings)
		case d.Name == "same" && len(d.Warnings) > 0:
			t.Errorf("same: unexpected warnings %q", d.Warnings)
		}
	}
	if docCount(t, tgt, "re") != 4 {
		t.Errorf("target re holds %d documents, want 4 (3 kept from the old database, 1 new)", docCount(t, tgt, "re"))
	}
	// The text summary names the database and the warning.
	if err := c.DeleteDB(ctx, "re"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateDB(ctx, "re"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BulkDocs(ctx, "re", true, raw(`{"_id":"newer"}`)); err != nil {
		t.Fatal(err)
	}
	r = runSofa(t, bin, "replicate", src.URL, tgt.URL)
	r.want(t, exitOK)
	if !strings.Contains(r.stderr, `database "re": ok with warnings`) || !strings.Contains(r.stderr, "replication never deletes") {
		t.Errorf("text summary lacks the warning:\n%s", r.stderr)
	}
}
