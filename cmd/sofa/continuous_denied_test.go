package main

import (
	"bufio"
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
)

// TestCLI_ContinuousWrongPasswordStops: a continuous copy whose target
// user's password changed meanwhile stops at the next write with exit 1
// and one line saying the authentication failed: the refusal is not
// retried (each try a failed login, which CouchDB answers by locking the
// account), nor taken for a read-only target.
func TestCLI_ContinuousWrongPasswordStops(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "CouchDB's accounts and database members")
	bin := sofaBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv := couchtest.StartWith(t, couchtest.Options{Users: map[string]string{"mem": "old-pw"}})
	c := srv.Client()
	arCreate(t, srv, "src", true, arSmallDocs("d", 2)...)
	if err := c.CreateDB(ctx, "memdb"); err != nil {
		t.Fatal(err)
	}
	if err := c.PutSecurity(ctx, "memdb", couchtest.Security{Members: couchtest.Group{Names: []string{"mem"}}}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "replicate", "--continuous", srv.DBURL("src"), srv.UserURL("mem", "old-pw")+"/memdb")
	lines := stderrLines(t, cmd)
	var log strings.Builder
	for caught := false; !caught; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("sofa ended before it caught up:\n%s", log.String())
			}
			log.WriteString(l + "\n")
			caught = strings.Contains(l, "caught up")
		case <-ctx.Done():
			t.Fatalf("never caught up:\n%s", log.String())
		}
	}
	// the server refuses the old password before the next write is
	// there to copy
	if err := c.ChangeUserPassword(ctx, "mem", "old-pw", "new-pw", "memdb"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(ctx, "src", "after", map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		log.WriteString(l + "\n")
	}
	_ = cmd.Wait()
	out := log.String()
	if code := cmd.ProcessState.ExitCode(); code != exitFatal {
		t.Fatalf("exit %d, want %d:\n%s", code, exitFatal, out)
	}
	last := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	if !strings.Contains(last, "authentication failed") {
		t.Errorf("last line %q, want it to say the authentication failed", last)
	}
	if strings.Contains(out, "retrying in") || strings.Contains(out, "read-only") || strings.Contains(out, "locked") || strings.Contains(out, "old-pw") {
		t.Errorf("the refusal was retried, called read-only, or the password shown:\n%s", out)
	}
}

// TestCLI_ContinuousServersTargetPasswordStops (found by a user on
// CouchDB 3.5.2): a continuous whole-server run whose target account's
// password changed meanwhile retried the catch-up that the target
// refused ("catch-up failed: ... authentication failed (HTTP 401);
// retrying in 2s", then 4s, 8s...) until CouchDB locked the account. It
// now stops at the first refusal with exit 1 and one line saying the
// authentication failed. Before that, documents a validate_doc_update of
// the target refuses (403 per document: in `_bulk_docs`, and as the
// answer to the multipart PUT of one with a large attachment) are
// reported as not copied and the run goes on: a refused document is no
// refused request.
func TestCLI_ContinuousServersTargetPasswordStops(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "CouchDB's server admins and validate_doc_update")
	bin := sofaBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	a := couchtest.Start(t)
	b := couchtest.StartWith(t, couchtest.Options{Config: map[string]string{"admins/repl": adminHash("old-pw")}})
	ca, cb := a.Client(), b.Client()
	deniedSeed(t, a, "s1", "s2")
	r := startLiveRun(ctx, t, bin, "replicate", "--continuous", a.URL, b.UserURL("repl", "old-pw"))
	r.waitLine(`initial copy done: 2 databases \(2 ok`)

	// Refused documents: reported, and the run goes on.
	vdu := `function(d) { if (d.bad) { throw({forbidden: 'no bad documents here'}); } }`
	if _, err := cb.PutDoc(ctx, "s1", "_design/v", map[string]any{"validate_doc_update": vdu}); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.PutDoc(ctx, "s1", "bad", map[string]any{"bad": true}); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 200<<10)
	_, _ = rand.Read(big)
	rev, err := ca.PutDoc(ctx, "s1", "bad-att", map[string]any{"bad": true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.PutAttachment(ctx, "s1", "bad-att", rev, "blob", "application/octet-stream", big); err != nil {
		t.Fatal(err)
	}
	for seen := map[string]bool{}; !seen["bad"] || !seen["bad-att"]; {
		m := r.waitLine(`s1: not copied: .*"?(bad-att|bad)"?.*forbidden`)
		seen[strings.Trim(m[1], `"`)] = true
	}
	deniedArrives(ctx, t, a, b, "s1", "ok")
	if got := r.log.String(); strings.Contains(got, "authentication failed") || strings.Contains(got, "stopping") {
		t.Fatalf("a document refused by validate_doc_update was taken for a refused request:\n%s", got)
	}

	setAdminPassword(ctx, t, b, "repl", "new-pw")
	if _, err := ca.PutDoc(ctx, "s2", "after", map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	r.expectDenied(t, "old-pw", "new-pw")
}

// TestCLI_ContinuousServersSourcePasswordStops: the same with the
// source account's password changed: the catch-up's `_changes` read
// ("read changes: ... 401") is refused, and the run stops with exit 1
// rather than retry it.
func TestCLI_ContinuousServersSourcePasswordStops(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "CouchDB's server admins")
	bin := sofaBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	a := couchtest.StartWith(t, couchtest.Options{Config: map[string]string{"admins/repl": adminHash("old-pw")}})
	b := couchtest.Start(t)
	deniedSeed(t, a, "s1", "s2")
	r := startLiveRun(ctx, t, bin, "replicate", "--continuous", a.UserURL("repl", "old-pw"), b.URL)
	r.waitLine(`initial copy done: 2 databases \(2 ok`)
	deniedArrives(ctx, t, a, b, "s1", "ok")

	setAdminPassword(ctx, t, a, "repl", "new-pw")
	if _, err := a.Client().PutDoc(ctx, "s2", "after", map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	r.expectDenied(t, "old-pw", "new-pw")
}

// deniedSeed creates dbs on srv, two documents each, and
// _global_changes, so that the run follows `_db_updates`.
func deniedSeed(t *testing.T, srv *couchtest.Server, dbs ...string) {
	t.Helper()
	for _, db := range dbs {
		arCreate(t, srv, db, true, arSmallDocs("d", 2)...)
	}
	if err := srv.Client().CreateDB(t.Context(), "_global_changes"); err != nil && couchtest.StatusOf(err) != 412 {
		t.Fatal(err)
	}
}

// deniedArrives writes id into db on src and waits until the target's
// changes feed (longpoll) shows it: the run still copies.
func deniedArrives(ctx context.Context, t *testing.T, src, dst *couchtest.Server, db, id string) {
	t.Helper()
	cb := dst.Client()
	var info struct {
		UpdateSeq json.RawMessage `json:"update_seq"`
	}
	if err := cb.GetJSON(ctx, "/"+db, &info); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Client().PutDoc(ctx, db, id, map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	since := strings.Trim(string(info.UpdateSeq), `"`)
	for {
		var ch struct {
			Results []struct {
				ID string `json:"id"`
			} `json:"results"`
			LastSeq json.RawMessage `json:"last_seq"`
		}
		if err := cb.GetJSON(ctx, "/"+db+"/_changes?feed=longpoll&timeout=60000&since="+url.QueryEscape(since), &ch); err != nil {
			t.Fatalf("%s/%s never arrived: %v", db, id, err)
		}
		for _, r := range ch.Results {
			if r.ID == id {
				return
			}
		}
		since = strings.Trim(string(ch.LastSeq), `"`)
	}
}

// adminHash is pw hashed as CouchDB keeps a server admin's password
// (few iterations: every request with basic auth costs one hash).
func adminHash(pw string) string {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	s := hex.EncodeToString(salt)
	key, err := pbkdf2.Key(sha256.New, pw, []byte(s), 10, 32)
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf("-pbkdf2:sha256-%s,%s,10", hex.EncodeToString(key), s)
}

// setAdminPassword changes the password of srv's server admin user to
// pw, and waits until the server refuses the old one (any request with
// it then fails).
func setAdminPassword(ctx context.Context, t *testing.T, srv *couchtest.Server, user, pw string) {
	t.Helper()
	if err := srv.Client().PutJSON(ctx, "/_node/_local/_config/admins/"+user, adminHash(pw), nil); err != nil {
		t.Fatal(err)
	}
	old := couchtest.NewClient(srv.UserURL(user, "old-pw"))
	for {
		var dbs []string
		if err := old.GetJSON(ctx, "/_all_dbs", &dbs); err != nil {
			if couchtest.StatusOf(err) != 401 {
				t.Fatalf("the old password: %v, want 401", err)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the old password is still accepted")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// liveRun is a sofa process whose stderr is read line by line.
type liveRun struct {
	t     *testing.T
	ctx   context.Context
	cmd   *exec.Cmd
	lines chan string
	log   strings.Builder
}

func startLiveRun(ctx context.Context, t *testing.T, bin string, args ...string) *liveRun {
	t.Helper()
	r := &liveRun{t: t, ctx: ctx, cmd: exec.CommandContext(ctx, bin, args...), lines: make(chan string, 1000)}
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = r.cmd.Process.Kill()
			_ = r.cmd.Wait()
		}
	})
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	return r
}

// waitLine reads lines until one matches re, and returns its submatches.
func (r *liveRun) waitLine(re string) []string {
	r.t.Helper()
	rx := regexp.MustCompile(re)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				r.t.Fatalf("sofa ended before a line matching %s:\n%s", re, r.log.String())
			}
			r.log.WriteString(l + "\n")
			if m := rx.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-r.ctx.Done():
			r.t.Fatalf("no line matching %s:\n%s", re, r.log.String())
		}
	}
}

// deniedWithin bounds the wait for a run refused by a server to end:
// the refusal comes with the next request, and a run that stops on it
// ends at once (its final checkpoints aside).
const deniedWithin = 30 * time.Second

// expectDenied waits for the run to end on a refused request: exit 1,
// the last line saying the authentication failed, no retry on the way
// (a retry line fails the test at once), nothing locked, and none of
// secrets in the output.
func (r *liveRun) expectDenied(t *testing.T, secrets ...string) {
	t.Helper()
	retry := regexp.MustCompile(`retrying in|reconnecting in|trying again in|locked`)
	timeout := time.NewTimer(deniedWithin)
	defer timeout.Stop()
	start := time.Now()
	fail := func(format string, args ...any) {
		t.Helper()
		_ = r.cmd.Process.Kill()
		for l := range r.lines {
			r.log.WriteString(l + "\n")
		}
		_ = r.cmd.Wait()
		t.Fatalf(format+":\n%s", append(args, r.log.String())...)
	}
	for done := false; !done; {
		select {
		case l, ok := <-r.lines:
			if !ok {
				done = true
				break
			}
			r.log.WriteString(l + "\n")
			if retry.MatchString(l) {
				fail("the refusal was retried (%q)", l)
			}
		case <-timeout.C:
			fail("still running %s after the password changed", deniedWithin)
		}
	}
	_ = r.cmd.Wait()
	out := r.log.String()
	t.Logf("stopped %s after the write that met the new password:\n%s", time.Since(start).Round(time.Millisecond), out)
	if code := r.cmd.ProcessState.ExitCode(); code != exitFatal {
		t.Fatalf("exit %d, want %d:\n%s", code, exitFatal, out)
	}
	trimmed := strings.TrimSpace(out)
	last := trimmed[strings.LastIndex(trimmed, "\n")+1:]
	if !strings.Contains(last, "authentication failed") {
		t.Errorf("last line %q, want it to say the authentication failed", last)
	}
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("the output shows %q", s)
		}
	}
}
