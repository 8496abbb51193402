package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestFlagCheck_Negative: every numeric client, controller and engine flag
// refuses a value below its least with exit 2 and one line naming the flag,
// before any network access (the URLs name a closed port, so a probe would
// fail with exit 1 instead).
func TestFlagCheck_Negative(t *testing.T) {
	bin := sofaBin(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", closedPort(t))
	dir := t.TempDir()
	archive := filepath.Join(dir, "in.sofa")
	if err := os.WriteFile(archive, []byte("not read: flags are checked first"), 0o600); err != nil {
		t.Fatal(err)
	}
	verbs := map[string][]string{
		"replicate": {"replicate", url + "/a", url + "/b"},
		"backup":    {"backup", url + "/a", filepath.Join(dir, "out.sofa")},
		"restore":   {"restore", archive, url + "/a"},
	}
	cases := []struct {
		flag, value string
		verbs       []string
	}{
		{"max-rps", "-1", []string{"replicate", "backup", "restore"}},
		{"max-rps", "NaN", []string{"replicate"}},
		{"q", "-1", []string{"replicate", "restore"}},
		{"n", "-1", []string{"replicate", "restore"}},
		{"retry-time", "-1s", []string{"replicate", "backup", "restore"}},
		{"request-timeout", "-1s", []string{"replicate", "backup", "restore"}},
		{"max-429-wait", "-1s", []string{"replicate", "backup", "restore"}},
		{"max-conns", "-1", []string{"replicate", "backup", "restore"}},
		{"max-requests", "-1", []string{"replicate", "backup", "restore"}},
		{"max-dbs", "-1", []string{"replicate", "backup", "restore"}},
		{"ideal-duration", "-1s", []string{"replicate", "backup", "restore"}},
		{"changes-page", "-2", []string{"replicate", "backup"}},
		{"stream-threshold", "-2", []string{"replicate"}},
		{"workers", "-1", []string{"replicate", "backup", "restore"}},
		{"progress-interval", "-1s", []string{"replicate", "backup", "restore"}},
		{"progress-interval", "1ns", []string{"replicate", "backup", "restore"}},
		{"max-rps", "1e-300", []string{"replicate", "backup", "restore"}},
		{"latency-tolerance", "NaN", []string{"replicate", "backup", "restore"}},
		{"latency-tolerance", "+Inf", []string{"replicate"}},
		{"latency-tolerance", "0.5", []string{"replicate"}},
	}
	for _, c := range cases {
		for _, verb := range c.verbs {
			args := append(append([]string{}, verbs[verb]...), "--"+c.flag+"="+c.value)
			r := cliRun(t, bin, args...)
			if r.code != exitUsage {
				t.Errorf("sofa %s --%s=%s: exit %d, want %d\n%s", verb, c.flag, c.value, r.code, exitUsage, r.stderr)
				continue
			}
			msg := strings.TrimRight(r.stderr, "\n")
			if strings.Contains(msg, "\n") || !strings.Contains(msg, "--"+c.flag+" ") {
				t.Errorf("sofa %s --%s=%s: want one line naming --%s, got %q", verb, c.flag, c.value, c.flag, r.stderr)
			}
			if c.value == "NaN" && c.flag == "max-rps" && !strings.Contains(msg, "is not a number") {
				t.Errorf("sofa %s --%s=NaN: %q, want it to say it is not a number", verb, c.flag, msg)
			}
		}
	}
	// The same check applies to values from the environment.
	t.Setenv("SOFA_MAX_CONNS", "-3")
	r := cliRun(t, bin, verbs["backup"]...)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--max-conns ") {
		t.Errorf("SOFA_MAX_CONNS=-3: exit %d, %q", r.code, r.stderr)
	}
}

// TestFlagCheck_ZeroAndMinusOneAccepted: 0 (the default, or no cap) and
// the documented -1 pass the check; the run then fails on the closed port
// (exit 1), not as a usage error.
func TestFlagCheck_ZeroAndMinusOneAccepted(t *testing.T) {
	bin := sofaBin(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", closedPort(t))
	args := []string{"replicate", url + "/a", url + "/b", "--retry-time", "1ms", "--request-timeout", "0s",
		"--max-rps", "0", "--q", "0", "--max-conns", "0", "--max-requests", "0", "--max-dbs", "0",
		"--ideal-duration", "0s", "--max-429-wait", "0s", "--changes-page", "-1", "--stream-threshold", "-1",
		"--progress-interval", "0s", "--latency-tolerance", "-1"}
	r := cliRun(t, bin, args...)
	if r.code != exitFatal {
		t.Fatalf("exit %d, want %d (connection refused)\n%s", r.code, exitFatal, r.stderr)
	}
	for _, extra := range [][]string{{"--latency-tolerance", "0", "--max-rps", "0.01"}, {"--latency-tolerance", "1"}} {
		if r := cliRun(t, bin, append(args[:len(args):len(args)], extra...)...); r.code != exitFatal {
			t.Errorf("%v: exit %d, want %d (connection refused)\n%s", extra, r.code, exitFatal, r.stderr)
		}
	}
	if r.took > time.Minute {
		t.Errorf("took %s", r.took)
	}
}

// TestFlagCheck_HelpSaysWhatZeroMeans: the help of every checked flag says
// what 0 selects.
func TestFlagCheck_HelpSaysWhatZeroMeans(t *testing.T) {
	for _, mk := range []func() *cobra.Command{newReplicateCmd, newBackupCmd, newRestoreCmd} {
		cmd := mk()
		for _, nf := range numericFlags {
			fl := cmd.Flags().Lookup(nf.name)
			if fl == nil {
				continue
			}
			if !strings.Contains(fl.Usage, "(0: ") {
				t.Errorf("%s --%s: help %q does not say what 0 means", cmd.Name(), nf.name, fl.Usage)
			}
		}
	}
}

// TestFlagUsageNamesNoValue: no flag's usage text holds a backquoted
// word, which pflag would print as the flag's value name (a new user
// found restore's --verify shown as `--verify sofa verify --full ARCHIVE
// TARGET`, the whole help column pushed right).
func TestFlagUsageNamesNoValue(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				t.Errorf("sofa %s --%s: usage holds a backquote: %q", c.Name(), f.Name, f.Usage)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
}

// Usage lines count arguments in good English, and a database copy given
// server-mode flags is pointed at its own flags only where they stand in.
func TestUsageWording(t *testing.T) {
	if a, b := arguments(1), arguments(3); a != "1 argument" || b != "3 arguments" {
		t.Errorf("arguments: %q, %q", a, b)
	}
	if h := oneDBHint([]string{"--verify"}); h != "" {
		t.Errorf("--verify: hint %q, want none", h)
	}
	if h := oneDBHint([]string{"--include", "--reuse-existing"}); !strings.Contains(h, "--create-target") {
		t.Errorf("--reuse-existing: hint %q, want --create-target named", h)
	}
}

// A certificate or key file that is missing or no file, and --ca-cert
// beside --insecure (which checks no certificate), are usage errors
// (exit 2), found before any connection: a missing file was exit 1.
func TestFlagCheck_TLSFiles(t *testing.T) {
	bin := sofaBin(t)
	dir := t.TempDir()
	pem := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(pem, []byte("not checked here"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--ca-cert", filepath.Join(dir, "missing.pem")},
		{"--source-ca-cert", dir},
		{"--client-cert", dir, "--client-key", pem},
		{"--target-client-cert", pem, "--target-client-key", filepath.Join(dir, "none.key")},
		{"--ca-cert", pem, "--insecure"},
	} {
		r := cliRun(t, bin, append([]string{"ls", "http://127.0.0.1:1"}, args...)...)
		if r.code != exitUsage || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("sofa ls %q: exit %d, %q: want %d and one line", args, r.code, r.stderr, exitUsage)
		}
	}
}
