package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/replicate"
)

// Faults and bad input (issue 3), end to end: the sofa binary against
// PouchDB Server, through the fault proxy where the case needs one.

type cliResult struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// cliRun runs the binary to completion (at most 3 minutes).
func cliRun(t *testing.T, bin string, args ...string) cliResult {
	t.Helper()
	return cliRunStdin(t, bin, nil, args...)
}

// cliRunStdin is cliRun with stdin (nil: none) on the binary's standard
// input.
func cliRunStdin(t *testing.T, bin string, stdin io.Reader, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("sofa %s: %v", strings.Join(args, " "), err)
	}
	return cliResult{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String(), took: time.Since(t0)}
}

func (r cliResult) wantCode(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// result decodes the --json output of a one-database run.
func (r cliResult) result(t *testing.T) resultDoc {
	t.Helper()
	var d resultDoc
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("output is not JSON (%v):\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	return d
}

// cliLoad writes n small documents into db.
func cliLoad(t *testing.T, srv *couchtest.Server, db string, n int) {
	t.Helper()
	for start := 0; start < n; start += 500 {
		var docs []json.RawMessage
		for i := start; i < min(n, start+500); i++ {
			docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"doc%05d","i":%d,"text":"%s"}`, i, i, strings.Repeat("z", 64))))
		}
		if _, err := srv.Client().BulkDocs(t.Context(), db, true, docs...); err != nil {
			t.Fatal(err)
		}
	}
}

// freePort returns a loopback port free a moment ago, for a server the
// test starts on it.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// closedPort returns a loopback port that refuses connections for the
// rest of the test: a socket bound to it but not listening (nor
// SO_REUSEADDR) holds it, so that no other process on a busy machine can
// start listening there meanwhile (a port closed right after it was
// picked could be taken by another test's server).
func closedPort(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return sa.(*syscall.SockaddrInet4).Port
}

// fakeServer answers the welcome like PouchDB Server and routes the rest
// to h.
func fakeServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

// Issue item 7: bad input gives one clear line naming the endpoint
// (credentials removed), the documented exit code, no panic and no stack
// trace.
func TestCLI_BadInput(t *testing.T) {
	bin := sofaBin(t)
	const pw = "s3cret-pw"
	srv := couchtest.StartWith(t, couchtest.Options{AdminUser: "admin", AdminPassword: pw})
	if err := srv.Client().CreateDB(t.Context(), "src"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, srv, "src", 5)
	good := srv.UserURL("admin", pw)
	host := strings.TrimPrefix(srv.URL, "http://")
	closed := closedPort(t)

	html := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body><h1>It works!</h1></body></html>")
	})
	cutWelcome := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"couchdb":"Welcome","vers`)
	})
	// A server whose welcome and database answers are fine but whose
	// changes feed is always cut JSON.
	cutChanges := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/":
			fmt.Fprint(w, `{"couchdb":"Welcome","version":"3.3.3","uuid":"fake"}`)
		case r.URL.Path == "/db":
			fmt.Fprint(w, `{"db_name":"db","doc_count":3,"doc_del_count":0,"update_seq":"3-x","instance_start_time":"0"}`)
		case strings.HasPrefix(r.URL.Path, "/db/_local/"):
			w.WriteHeader(404)
			fmt.Fprint(w, `{"error":"not_found","reason":"missing"}`)
		case r.URL.Path == "/db/_changes":
			fmt.Fprint(w, `{"results":[{"seq":"1-x","id":"a","chan`)
		default:
			w.WriteHeader(404)
			fmt.Fprint(w, `{"error":"not_found","reason":"missing"}`)
		}
	})
	withCreds := func(u string) string { return strings.Replace(u, "http://", "http://admin:"+pw+"@", 1) }

	for _, tc := range []struct {
		name     string
		src, tgt string
		code     int
		names    string // the endpoint the line must name
		says     string // part of the explanation
	}{
		{"unreachable host", fmt.Sprintf("http://admin:%s@127.0.0.1:%d/src", pw, closed), good + "/tgt", 1, fmt.Sprintf("127.0.0.1:%d", closed), "cannot connect"},
		{"DNS failure", "http://admin:" + pw + "@no-such-host.invalid:5984/src", good + "/tgt", 1, "no-such-host.invalid", "cannot connect"},
		{"wrong credentials", srv.UserURL("admin", "wrong-password") + "/src", good + "/tgt", 1, host, "authentication failed"},
		{"missing source database", good + "/nosuch", good + "/tgt", 1, host + "/nosuch", "not found"},
		{"missing target database", good + "/src", good + "/nosuch", 1, host + "/nosuch", "does not exist"},
		{"HTML answer", withCreds(html) + "/db", good + "/tgt", 1, strings.TrimPrefix(html, "http://"), "not a CouchDB server"},
		{"cut JSON welcome", withCreds(cutWelcome) + "/db", good + "/tgt", 1, strings.TrimPrefix(cutWelcome, "http://"), "not a CouchDB server"},
		{"cut JSON changes", withCreds(cutChanges) + "/db", good + "/tgt", 1, strings.TrimPrefix(cutChanges, "http://") + "/db", "changes"},
		{"bad URL", "ftp://admin:" + pw + "@host/db", good + "/tgt", 2, "ftp://", "invalid source URL"},
		// a password with an unescaped "#", "/", "?" or "@" splits the URL
		// before its "@": none of it may show, and the line says why
		{"password with #", "http://admin:" + pw + "#x@" + host + "/src", good + "/tgt", 2, "http://admin@" + host + "/src", "percent-encode"},
		{"password with /", "http://admin:123/" + pw + "@" + host + "/src", good + "/tgt", 2, "http://admin@" + host + "/src", "percent-encode"},
		{"password with @", "http://admin:" + pw + "@x/y@" + host + "/src", good + "/tgt", 2, "http://admin@" + host + "/src", "percent-encode"},
		{"target password with ?", good + "/src", "http://admin:" + pw + "?x@" + host + "/tgt", 2, "http://admin@" + host + "/tgt", "SOFA_TARGET_PASSWORD"},
		// a fault outside the user name and password gets no hint about them
		{"bad escape in the path", good + "/%zz", good + "/tgt", 2, host + "/%zz", `invalid URL escape "%zz"`},
		{"port out of range", "http://admin:" + pw + "@127.0.0.1:99999/src", good + "/tgt", 2, "127.0.0.1:99999", "port 99999 is not in 1-65535"},
		{"query string", good + "/src?x=1", good + "/tgt", 2, host + "/src?x=1", "takes no query string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// no periodic progress line: the run may last about as long as
			// its interval, and the test counts stderr's lines
			args := []string{"replicate", tc.src, tc.tgt, "--retry-time", "2s", "--request-timeout", "5s", "--progress-interval", "1h"}
			if tc.name != "missing target database" {
				args = append(args, "--create-target")
			}
			r := cliRun(t, bin, args...)
			r.wantCode(t, tc.code)
			all := r.stdout + r.stderr
			if strings.Contains(all, pw) {
				t.Errorf("output shows the password:\n%s", all)
			}
			for _, bad := range []string{"panic", "goroutine ", ".go:"} {
				if strings.Contains(all, bad) {
					t.Errorf("output has %q (a stack trace?):\n%s", bad, all)
				}
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			last := lines[len(lines)-1]
			if !strings.HasPrefix(last, "sofa: ") || !strings.Contains(last, tc.names) || !strings.Contains(last, tc.says) {
				t.Errorf("last line %q: want it to name %q and say %q", last, tc.names, tc.says)
			}
			if strings.HasPrefix(tc.name, "bad escape") && strings.Contains(last, "percent-encode") {
				t.Errorf("last line %q: a hint about the password for a fault in the path", last)
			}
			if len(lines) > 3 || len(lines) > 1 && !strings.Contains(lines[0], "stopped after") {
				t.Errorf("%d lines on stderr, want one clear line (after the counters of a run that started):\n%s", len(lines), r.stderr)
			}
			if r.took > 30*time.Second {
				t.Errorf("took %s", r.took)
			}
		})
	}
}

// Issue item 4: documents the target rejects (forbidden, injected by the
// proxy) are counted in doc_write_failures and listed; the run goes on and
// exits 3. A later run without the fault copies them and exits 0.
func TestCLI_RejectedDocsExit3(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	c := srv.Client()
	if err := c.CreateDB(t.Context(), "src"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, srv, "src", 300)
	px := faultproxy.StartT(t, srv.URL)
	if err := px.SetRules(faultproxy.Rule{Fault: faultproxy.RejectDocs, DocIDs: []string{"doc00007", "doc00123"}, Reason: "only admins may write"}); err != nil {
		t.Fatal(err)
	}
	r := cliRun(t, bin, "replicate", srv.URL+"/src", px.URL+"/tgt", "--create-target", "--json")
	r.wantCode(t, exitPartial)
	d := r.result(t)
	if d.Status != "partial" || d.Stats.DocWriteFailures != 2 || d.Stats.DocsWritten != 298 || len(d.Failures) != 2 {
		t.Fatalf("result %+v", d)
	}
	for _, f := range d.Failures {
		if (f.ID != "doc00007" && f.ID != "doc00123") || !strings.HasPrefix(f.Rev, "1-") || f.Error != "forbidden" || f.Reason != "only admins may write" {
			t.Errorf("failure %+v", f)
		}
	}
	// Human output lists each rejected revision; the checkpoint stayed
	// before them, so this run meets them again.
	r = cliRun(t, bin, "replicate", srv.URL+"/src", px.URL+"/tgt")
	r.wantCode(t, exitPartial)
	for _, id := range []string{"doc00007", "doc00123"} {
		if !strings.Contains(r.stderr, `not copied: id="`+id+`" rev=1-`) {
			t.Errorf("stderr does not list %s:\n%s", id, r.stderr)
		}
	}
	if !strings.Contains(r.stderr, "2 revisions were not copied") {
		t.Errorf("stderr lacks the closing line:\n%s", r.stderr)
	}
	// A reason over several lines (CouchDB's Erlang terms) is listed on
	// one.
	if err := px.SetRules(faultproxy.Rule{Fault: faultproxy.RejectDocs, DocIDs: []string{"doc00007", "doc00123"}, Reason: "{badmatch,\n    {error,\n        einval}}"}); err != nil {
		t.Fatal(err)
	}
	r = cliRun(t, bin, "replicate", srv.URL+"/src", px.URL+"/tgt")
	r.wantCode(t, exitPartial)
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if !strings.HasPrefix(l, "sofa: ") {
			t.Errorf("stderr line %q is not one of sofa's:\n%s", l, r.stderr)
		}
	}
	if !strings.Contains(r.stderr, `not copied: id="doc00007" rev=1-`) || !strings.Contains(r.stderr, "{badmatch, {error, einval}}") {
		t.Errorf("stderr does not list doc00007 with its reason on one line:\n%s", r.stderr)
	}
	if err := px.SetRules(); err != nil {
		t.Fatal(err)
	}
	r = cliRun(t, bin, "replicate", srv.URL+"/src", px.URL+"/tgt", "--json")
	r.wantCode(t, exitOK)
	if d := r.result(t); d.Stats.DocsWritten != 2 {
		t.Errorf("third run wrote %d, want the 2 rejected before", d.Stats.DocsWritten)
	}
	couchtest.AssertEqual(t, srv.DBURL("src"), srv.DBURL("tgt"), couchtest.CompareOptions{PouchDBRevpos: true})
}

// Issue items 2 and 6: 429 (Retry-After: 1) on 30% of all requests for
// 10 s; the run absorbs it, the target ends equal, and the summary counts
// retries, throttled answers and the time waited (JSON and text).
func TestCLI_Throttled30PercentSummary(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	if err := srv.Client().CreateDB(t.Context(), "src"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, srv, "src", 2000)
	px := faultproxy.StartT(t, srv.URL)
	if err := px.SetRules(faultproxy.Rule{Name: "429", Fault: faultproxy.Status, Status: 429, RetryAfter: "1", Probability: 0.3}); err != nil {
		t.Fatal(err)
	}
	stop := time.AfterFunc(10*time.Second, func() { px.SetRules() })
	defer stop.Stop()
	r := cliRun(t, bin, "replicate", px.URL+"/src", px.URL+"/tgt", "--create-target", "--json",
		"--batch-size", "100", "--write-batch-docs", "50", "--retry-time", "5s", "--max-429-wait", "2m")
	r.wantCode(t, exitOK)
	d := r.result(t)
	fired := px.Rule("429").Fired
	t.Logf("proxy answered 429 %d times; summary http %+v; took %s", fired, d.HTTP, r.took)
	if fired == 0 || d.HTTP.Throttled != fired || d.HTTP.Retries < fired || d.HTTP.WaitedSeconds < float64(fired) || d.HTTP.Requests < d.HTTP.Retries {
		t.Errorf("summary http %+v, proxy answered 429 %d times with Retry-After: 1", d.HTTP, fired)
	}
	if d.Stats.DocsWritten != 2000 {
		t.Errorf("docs_written=%d", d.Stats.DocsWritten)
	}
	couchtest.AssertEqual(t, srv.DBURL("src"), srv.DBURL("tgt"), couchtest.CompareOptions{PouchDBRevpos: true})

	// The text summary has the same counters.
	if err := px.SetRules(faultproxy.Rule{Name: "500", Method: "POST", Path: "/_revs_diff$", Fault: faultproxy.Status, Status: 500, Times: 1}); err != nil {
		t.Fatal(err)
	}
	cliLoad2(t, srv, "src", 10)
	r = cliRun(t, bin, "replicate", px.URL+"/src", px.URL+"/tgt")
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stderr, "http: requests=") || !strings.Contains(r.stderr, "retries=1 throttled=0 waited=") {
		t.Errorf("text summary lacks the http counters:\n%s", r.stderr)
	}
}

func cliLoad2(t *testing.T, srv *couchtest.Server, db string, n int) {
	t.Helper()
	var docs []json.RawMessage
	for i := 0; i < n; i++ {
		docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"extra%05d"}`, i)))
	}
	if _, err := srv.Client().BulkDocs(t.Context(), db, true, docs...); err != nil {
		t.Fatal(err)
	}
}

// C3: 5,000 docs; sofa is killed with SIGKILL at random moments 10 times
// and restarted; all docs are equal at the end, and after every kill the
// target's checkpoint covers only changes whose revisions the target holds.
func TestCLI_C3_KillAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts sofa 10 times")
	}
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	c := srv.Client()
	for _, db := range []string{"src", "tgt"} {
		if err := c.CreateDB(t.Context(), db); err != nil {
			t.Fatal(err)
		}
	}
	const n = 5000
	cliLoad(t, srv, "src", n)
	// Every request takes 20 ms more, so that a run lasts long enough to
	// be killed in the middle.
	px := faultproxy.StartT(t, srv.URL)
	if err := px.SetRules(faultproxy.Rule{Fault: faultproxy.Forward, Delay: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	repID := replicationID(t, px.URL+"/src", px.URL+"/tgt")
	args := []string{"replicate", px.URL + "/src", px.URL + "/tgt", "--quiet",
		"--batch-size", "50", "--workers", "4", "--checkpoint-interval", "100ms"}
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	killed := 0
	lastCP := ""
	for i := 0; i < 10; i++ {
		cmd := exec.Command(bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		wait := time.Duration(150+rnd.IntN(600)) * time.Millisecond
		select {
		case err := <-exited:
			t.Logf("run %d ended by itself before the kill at %s: %v %s", i, wait, err, stderr.String())
		case <-time.After(wait):
			err := cmd.Process.Kill()
			<-exited
			switch {
			case errors.Is(err, os.ErrProcessDone):
				t.Logf("run %d ended by itself as the kill at %s came", i, wait)
			case err != nil:
				t.Fatal(err)
			default:
				killed++
			}
		}
		// A request the killed process had sent may still be on its way
		// through the proxy (20 ms of delay) and land after the kill: the
		// checkpoint is read once the proxy has none in flight.
		for deadline := time.Now().Add(30 * time.Second); px.Stats().InFlight > 0; {
			if time.Now().After(deadline) {
				t.Fatalf("the proxy still has %d requests in flight 30 s after the kill", px.Stats().InFlight)
			}
			time.Sleep(5 * time.Millisecond)
		}
		seq, covered := checkpointNeverAhead(t, srv, repID)
		lastCP = seq
		t.Logf("run %d: killed after %s; checkpoint at seq %s covers %d changes; target holds %d docs", i, wait, seq, covered, docCount(t, srv, "tgt"))
	}
	if killed < 5 {
		t.Errorf("only %d of 10 runs were killed mid-run: the test did not test C3", killed)
	}
	// Read again just before the final run: it must start there.
	if lastCP != "" {
		lastCP, _ = checkpointNeverAhead(t, srv, repID)
	}
	r := cliRun(t, bin, "replicate", px.URL+"/src", px.URL+"/tgt", "--json")
	r.wantCode(t, exitOK)
	d := r.result(t)
	if lastCP != "" && d.StartSeq != lastCP {
		t.Errorf("final run started at %s, not at the checkpoint %s", d.StartSeq, lastCP)
	}
	if d.ReplicationID != repID {
		t.Errorf("replication id %s, test computed %s", d.ReplicationID, repID)
	}
	if got := docCount(t, srv, "tgt"); got != n {
		t.Errorf("target holds %d docs, want %d", got, n)
	}
	couchtest.AssertEqual(t, srv.DBURL("src"), srv.DBURL("tgt"), couchtest.CompareOptions{PouchDBRevpos: true})
}

// replicationID computes, independently of sofa's code, the checkpoint id
// of a one-database run with default content options: the md5 of
// "sofa-replication-v1", the source's identity and the target's (server
// uuid from the welcome, "/", database name), NUL-separated. The final
// run's id must equal it: a changed derivation orphans every checkpoint.
func replicationID(t *testing.T, srcURL, tgtURL string) string {
	t.Helper()
	identity := func(dbURL string) string {
		i := strings.LastIndexByte(dbURL, '/')
		var w struct {
			UUID string `json:"uuid"`
		}
		if err := couchtest.NewClient(dbURL[:i]).GetJSON(t.Context(), "/", &w); err != nil {
			t.Fatal(err)
		}
		if w.UUID == "" {
			t.Fatalf("%s: welcome without uuid", dbURL[:i])
		}
		return w.UUID + "/" + dbURL[i+1:]
	}
	sum := md5.Sum([]byte("sofa-replication-v1\x00" + identity(srcURL) + "\x00" + identity(tgtURL)))
	return hex.EncodeToString(sum[:])
}

// checkpointNeverAhead reads the target's checkpoint and checks that
// every revision of every source change up to its seq is on the target.
// It returns the checkpointed seq as sofa prints it ("" when there is no
// checkpoint yet) and how many changes it covers.
//
// Seqs are opaque (CouchDB's are strings), so "up to the seq" is
// computed without comparing them: the changes up to the checkpoint are
// all changes less those the source lists since it. The source is not
// written to during the test, so each document appears once; a server
// that lists more rows since a seq than it must (a rewind) only makes the
// check cover fewer changes, never a wrong failure.
func checkpointNeverAhead(t *testing.T, srv *couchtest.Server, repID string) (string, int) {
	t.Helper()
	c := srv.Client()
	var cp struct {
		SourceLastSeq json.RawMessage `json:"source_last_seq"`
	}
	if err := c.GetJSON(t.Context(), "/tgt/_local/"+repID, &cp); err != nil {
		if couchtest.StatusOf(err) == http.StatusNotFound {
			return "", 0
		}
		t.Fatal(err)
	}
	if len(cp.SourceLastSeq) == 0 || string(cp.SourceLastSeq) == "null" {
		t.Fatalf("checkpoint without source_last_seq")
	}
	type changes struct {
		Results []struct {
			ID      string `json:"id"`
			Changes []struct {
				Rev string `json:"rev"`
			} `json:"changes"`
		} `json:"results"`
	}
	var all, after changes
	if err := c.GetJSON(t.Context(), "/src/_changes?style=all_docs", &all); err != nil {
		t.Fatal(err)
	}
	since := replicate.Seq(cp.SourceLastSeq).String()
	if err := c.GetJSON(t.Context(), "/src/_changes?style=all_docs&since="+url.QueryEscape(since), &after); err != nil {
		t.Fatal(err)
	}
	later := map[string]bool{}
	for _, r := range after.Results {
		later[r.ID] = true
	}
	revs := map[string][]string{}
	for _, r := range all.Results {
		if later[r.ID] {
			continue
		}
		for _, x := range r.Changes {
			revs[r.ID] = append(revs[r.ID], x.Rev)
		}
	}
	if len(revs) > 0 {
		var missing map[string]json.RawMessage
		if err := c.PostJSON(t.Context(), "/tgt/_revs_diff", revs, &missing); err != nil {
			t.Fatal(err)
		}
		if len(missing) > 0 {
			t.Fatalf("checkpoint at seq %s is ahead of the target: %d of %d documents up to it are missing", since, len(missing), len(revs))
		}
	}
	return since, len(revs)
}

func docCount(t *testing.T, srv *couchtest.Server, db string) int64 {
	t.Helper()
	var info struct {
		DocCount int64 `json:"doc_count"`
	}
	if err := srv.Client().GetJSON(t.Context(), "/"+db, &info); err != nil {
		t.Fatal(err)
	}
	return info.DocCount
}

// Issue item 2: 429 waits are bounded by --max-429-wait: a source that
// always throttles its changes feed makes the run fail with a line saying
// so, soon after the bound, not after the retry budget or never.
func TestCLI_Max429WaitBounded(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	if err := srv.Client().CreateDB(t.Context(), "src"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, srv, "src", 10)
	px := faultproxy.StartT(t, srv.URL)
	if err := px.SetRules(faultproxy.Rule{Name: "429", Method: "GET", Path: "^/src/_changes$", Fault: faultproxy.Status, Status: 429, RetryAfter: "1"}); err != nil {
		t.Fatal(err)
	}
	r := cliRun(t, bin, "replicate", px.URL+"/src", px.URL+"/tgt", "--create-target", "--max-429-wait", "3s", "--retry-time", "1m")
	r.wantCode(t, exitFatal)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "/src") || !strings.Contains(last, "429") || !strings.Contains(last, "rate limits") {
		t.Errorf("last line %q: want the source, the 429 and the rate-limit bound", last)
	}
	if r.took < 2*time.Second || r.took > 20*time.Second {
		t.Errorf("took %s, want about the 3 s bound", r.took)
	}
	if n := px.Rule("429").Fired; n < 2 || n > 6 {
		t.Errorf("changes asked %d times in 3 s with Retry-After: 1", n)
	}
}
