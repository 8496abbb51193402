package main

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
)

// runNoEnv runs the binary with no SOFA_* credentials in its environment
// and no terminal on its standard input.
func runNoEnv(t *testing.T, bin string, args ...string) arRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SOFA_SOURCE_") && !strings.HasPrefix(kv, "SOFA_TARGET_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	return arRun{args: args, code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// TestAuth_Messages: what an operator reads when the server refuses the
// credentials. A right password of a user who is not a server admin is not
// called wrong: the server's reason is given ("You are not a server
// admin" on CouchDB, which lets only admins list databases). A wrong
// password is. A user without a password, off a terminal, is told no
// password was given and which variable gives one. No internal package
// name leaks.
func TestAuth_Messages(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.StartWith(t, couchtest.Options{AdminUser: "admin", AdminPassword: "admin-pw", Users: map[string]string{"reader": "readpw"}})
	arCreate(t, srv, "app", true, arSmallDocs("x", 2)...)
	base, _ := url.Parse(srv.URL)
	base.User = nil
	with := func(user, pw string) string {
		u := *base
		switch {
		case pw != "":
			u.User = url.UserPassword(user, pw)
		case user != "":
			u.User = url.User(user)
		}
		return u.String()
	}
	tgt := srv.UserURL("admin", "admin-pw") + "/copy"
	leaks := func(t *testing.T, r arRun) {
		t.Helper()
		for _, bad := range []string{"fleet:", "couch:", "<nil>", "readpw", "admin-pw"} {
			if strings.Contains(r.stderr, bad) {
				t.Errorf("sofa %s: stderr holds %q:\n%s", strings.Join(r.args, " "), bad, r.stderr)
			}
		}
	}

	t.Run("not an admin", func(t *testing.T) {
		couchtest.RequireKind(t, couchtest.CouchDB, "PouchDB Server lists the databases to any user")
		other := couchtest.Start(t)
		for _, args := range [][]string{
			{"ls", with("reader", "readpw")},
			{"replicate", with("reader", "readpw"), other.URL},
			{"backup", with("reader", "readpw"), t.TempDir() + "/b.sofa"},
		} {
			r := runNoEnv(t, bin, args...)
			leaks(t, r)
			if r.code == exitOK || strings.Contains(r.stderr, "check the user name and password") || !strings.Contains(r.stderr, "You are not a server admin") {
				t.Errorf("sofa %s: exit %d, want the server's refusal:\n%s", args[0], r.code, r.stderr)
			}
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		r := runNoEnv(t, bin, "ls", with("reader", "wrong"))
		leaks(t, r)
		if r.code == exitOK || !strings.Contains(r.stderr, "check the user name and password") {
			t.Errorf("exit %d:\n%s", r.code, r.stderr)
		}
	})
	t.Run("no password", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			env  string
		}{
			{[]string{"ls", with("admin", "")}, "SOFA_SOURCE_PASSWORD"},
			{[]string{"ls", with("admin", "") + "/app"}, "SOFA_SOURCE_PASSWORD"},
			{[]string{"replicate", with("admin", "") + "/app", tgt, "--create-target"}, "SOFA_SOURCE_PASSWORD"},
			{[]string{"replicate", srv.UserURL("admin", "admin-pw") + "/app", with("admin", "") + "/copy", "--create-target"}, "SOFA_TARGET_PASSWORD"},
		} {
			r := runNoEnv(t, bin, c.args...)
			leaks(t, r)
			if r.code != exitUsage || !strings.Contains(r.stderr, "no password given") || !strings.Contains(r.stderr, c.env) {
				t.Errorf("sofa %s: exit %d, want 2, \"no password given\" and %s:\n%s", strings.Join(c.args, " "), r.code, c.env, r.stderr)
			}
		}
		// A password and no user (SOFA_SOURCE_PASSWORD alone, or
		// http://:pw@host) was dropped without a word: the run went on
		// anonymous and failed on authentication.
		for _, c := range []struct {
			url string
			env []string
		}{
			{srv.URL, []string{"SOFA_SOURCE_PASSWORD=pw-alone-s3cret"}},
			{strings.Replace(srv.URL, "://", "://:pw-alone-s3cret@", 1), nil},
		} {
			cmd := exec.CommandContext(t.Context(), bin, "ls", c.url)
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "SOFA_SOURCE_") && !strings.HasPrefix(kv, "SOFA_TARGET_") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env, c.env...)
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != exitUsage || !strings.Contains(string(out), "no user name") || !strings.Contains(string(out), "SOFA_SOURCE_USER") || strings.Contains(string(out), "pw-alone-s3cret") {
				t.Errorf("a password without a user (%v): exit %d, want 2 saying there is no user name, without the password:\n%s", c.env, code, out)
			}
		}
		// Said before any request (an empty password costs the account a
		// failed login): a server that is not there is not even tried.
		r := runNoEnv(t, bin, "ls", "http://someone@127.0.0.1:1")
		if r.code != exitUsage || !strings.Contains(r.stderr, "no password given") {
			t.Errorf("sofa ls of an absent server with a user and no password: exit %d, want 2 and \"no password given\":\n%s", r.code, r.stderr)
		}
	})
}

// TestMessages_BadPatternNamesNoPackage: a malformed --include pattern is
// a usage error that names the pattern, not an internal package.
func TestMessages_BadPatternNamesNoPackage(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	other := couchtest.Start(t)
	r := runNoEnv(t, bin, "replicate", srv.URL, other.URL, "--include", "[")
	if r.code != exitUsage || !strings.Contains(r.stderr, `bad pattern "["`) || strings.Contains(r.stderr, "fleet:") {
		t.Errorf("exit %d:\n%s", r.code, r.stderr)
	}
}
