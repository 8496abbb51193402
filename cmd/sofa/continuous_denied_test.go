package main

import (
	"bufio"
	"context"
	"os/exec"
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
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1000)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
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
	var user map[string]any
	if err := c.GetJSON(ctx, "/_users/org.couchdb.user:mem", &user); err != nil {
		t.Fatal(err)
	}
	user["password"] = "new-pw"
	if err := c.PutJSON(ctx, "/_users/org.couchdb.user:mem", user, nil); err != nil {
		t.Fatal(err)
	}
	// the server refuses the old password (its cache of users follows
	// _users on its own time) before the next write is there to copy
	old := couchtest.NewClient(srv.UserURL("mem", "old-pw"))
	for {
		var info map[string]any
		if err := old.GetJSON(ctx, "/memdb", &info); err != nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the old password is still accepted")
		case <-time.After(20 * time.Millisecond):
		}
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
