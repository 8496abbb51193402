package main

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// lockedBuffer is a bytes.Buffer a process writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stallRun runs sofa with args while the proxy answers 503 (Retry-After:
// 1) to the requests rule matches: once the rule has fired `fires` times
// (several seconds in which nothing moves, tens of progress ticks of
// 100 ms) the rule is lifted and the run completes. It returns stderr.
func stallRun(t *testing.T, px *faultproxy.Proxy, rule faultproxy.Rule, fires int64, args ...string) string {
	t.Helper()
	rule.Name = "stall " + args[0]
	rule.Fault, rule.Status, rule.RetryAfter = faultproxy.Status, 503, "1"
	if err := px.SetRules(rule); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sofaBin(t), append(args, "--progress-interval", "100ms")...)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for px.Rule(rule.Name).Fired < fires {
		select {
		case err := <-exited:
			t.Fatalf("sofa ended (%v) before the proxy answered 503 %d times:\n%s", err, fires, stderr.String())
		case <-tick.C:
		}
	}
	if err := px.SetRules(); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		t.Fatalf("sofa %s: %v\n%s", args[0], err, stderr.String())
	}
	return stderr.String()
}

// repeats returns the most identical progress lines in a row (each line
// first passed through norm, which removes what only tells the time) and
// the lines.
func repeats(out string, isProgress func(string) bool, norm func(string) string) (int, []string) {
	var lines []string
	best, run, prev := 0, 0, "\x00"
	for _, l := range strings.Split(out, "\n") {
		if !isProgress(l) {
			continue
		}
		lines = append(lines, l)
		l = norm(l)
		if l == prev {
			run++
		} else {
			run = 1
		}
		prev = l
		best = max(best, run)
	}
	return best, lines
}

// A progress line is printed when something changed; while requests are
// retried and nothing moves, only a "waiting" line now and then, saying
// for how long, what was retried and on which host. Without that the same
// line came out on every tick (about 20 times during a CouchDB outage),
// both from a one-database copy and from the log lines of a fleet verb.
func TestProgress_NoRepeatedLinesWhileRetrying(t *testing.T) {
	srv := couchtest.Start(t)
	if err := srv.Client().CreateDB(t.Context(), "src"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, srv, "src", 300)
	px := faultproxy.StartT(t, srv.URL)
	pxURL, err := url.Parse(px.URL)
	if err != nil {
		t.Fatal(err)
	}
	host := pxURL.Host

	// One database: the target's _bulk_docs answers 503 for a while.
	out := stallRun(t, px, faultproxy.Rule{Method: "POST", Path: "/_bulk_docs$"}, 4,
		"replicate", srv.DBURL("src"), px.URL+"/tgt", "--create-target", "--max-429-wait", "2m")
	rate := regexp.MustCompile(`\(\d+/s\)`)
	n, lines := repeats(out, func(l string) bool { return strings.HasPrefix(l, "sofa: src: ") },
		func(l string) string { return rate.ReplaceAllString(l, "") })
	t.Logf("one database: %d progress lines, at most %d identical in a row", len(lines), n)
	if n > 1 {
		t.Errorf("one database: %d identical progress lines in a row:\n%s", n, strings.Join(lines, "\n"))
	}
	checkWaiting(t, lines, "no change for", host)

	// A fleet verb's log lines: backup, whose source's _changes answers 503.
	archive := filepath.Join(t.TempDir(), "b.sofa")
	out = stallRun(t, px, faultproxy.Rule{Path: "/_changes$"}, 4,
		"backup", px.URL, archive, "--include", "src", "--max-429-wait", "2m")
	timeish := regexp.MustCompile(`(^| )(time|elapsed|docs_per_s|bytes_per_s|eta)=\S+`)
	n, lines = repeats(out, func(l string) bool {
		// the totals lines ("progress db" lines follow each changed one)
		return strings.Contains(l, "msg=progress ") || strings.Contains(l, `msg="progress waiting"`)
	},
		func(l string) string { return timeish.ReplaceAllString(l, "") })
	t.Logf("backup: %d progress lines, at most %d identical in a row", len(lines), n)
	if n > 1 {
		t.Errorf("backup: %d identical progress lines in a row:\n%s", n, strings.Join(lines, "\n"))
	}
	checkWaiting(t, lines, `msg="progress waiting"`, host)
}

// checkWaiting wants at least one waiting line (marked by mark) among
// lines naming the retries and the host waited on; any other waiting line
// must say that nothing was retried or in flight (a stall in local work,
// the archive's last writes on a loaded machine), never nothing at all.
func checkWaiting(t *testing.T, lines []string, mark, host string) {
	t.Helper()
	named := 0
	for _, l := range lines {
		if !strings.Contains(l, mark) {
			continue
		}
		switch {
		case strings.Contains(l, "retr") && strings.Contains(l, "waiting on host "+host):
			named++
		case strings.Contains(l, "no request retried or in flight"):
		default:
			t.Errorf("waiting line does not say what was retried on host %s: %s", host, l)
		}
	}
	if named == 0 {
		t.Errorf("no line says the run is waiting on retries on host %s (%q):\n%s", host, mark, strings.Join(lines, "\n"))
	}
}

// A restore reports its progress like a backup (found by a new user: it
// printed nothing until its summary): while the target's _bulk_docs
// answers 503, its log lines say what it waits on, and never repeat.
func TestProgress_RestoreReports(t *testing.T) {
	srv := couchtest.Start(t)
	if err := srv.Client().CreateDB(t.Context(), "src"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, srv, "src", 300)
	archive := filepath.Join(t.TempDir(), "r.sofa")
	runSofa(t, sofaBin(t), "backup", srv.URL, archive, "--include", "src", "-q").want(t, exitOK)
	tgt := couchtest.Start(t)
	px := faultproxy.StartT(t, tgt.URL)
	pxURL, err := url.Parse(px.URL)
	if err != nil {
		t.Fatal(err)
	}
	out := stallRun(t, px, faultproxy.Rule{Method: "POST", Path: "/_bulk_docs$"}, 4,
		"restore", archive, px.URL, "--max-429-wait", "2m")
	timeish := regexp.MustCompile(`(^| )(time|elapsed|docs_per_s|bytes_per_s|eta)=\S+`)
	n, lines := repeats(out, func(l string) bool {
		return strings.Contains(l, "msg=progress ") || strings.Contains(l, `msg="progress waiting"`)
	}, func(l string) string { return timeish.ReplaceAllString(l, "") })
	t.Logf("restore: %d progress lines, at most %d identical in a row", len(lines), n)
	if len(lines) == 0 {
		t.Fatalf("restore printed no progress line:\n%s", out)
	}
	if n > 1 {
		t.Errorf("restore: %d identical progress lines in a row:\n%s", n, strings.Join(lines, "\n"))
	}
	checkWaiting(t, lines, `msg="progress waiting"`, pxURL.Host)
}

// --json keeps stderr free of progress lines unless --progress-interval
// is given: then they come as without --json (a new user asked for them
// and got none).
func TestProgress_JSONWithInterval(t *testing.T) {
	srv := couchtest.Start(t)
	if err := srv.Client().CreateDB(t.Context(), "src"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, srv, "src", 50)
	px := faultproxy.StartT(t, srv.URL)
	px2 := faultproxy.StartT(t, couchtest.Start(t).URL)
	for _, c := range []struct {
		px   *faultproxy.Proxy
		args []string
	}{
		{px, []string{"replicate", srv.DBURL("src"), px.URL + "/tgt", "--create-target"}},
		{px2, []string{"replicate", srv.URL, px2.URL, "--include", "src"}},
	} {
		args := c.args
		out := stallRun(t, c.px, faultproxy.Rule{Method: "POST", Path: "/_bulk_docs$"}, 3, append(args, "--json", "--max-429-wait", "2m")...)
		if !strings.Contains(out, "no change for") && !strings.Contains(out, `msg="progress waiting"`) {
			t.Errorf("sofa %s --json --progress-interval: no progress line on stderr:\n%s", strings.Join(args, " "), out)
		}
	}
}
