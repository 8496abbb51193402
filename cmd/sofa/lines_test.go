package main

import (
	"bufio"
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// stderrLines starts cmd and returns its stderr's lines as they come
// (the channel closes when the process closes stderr).
func stderrLines(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
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
	return lines
}

// waitMatch reads lines into all until one matches re and returns its
// submatches; it fails the test when the lines end or ctx does first.
func waitMatch(t *testing.T, ctx context.Context, lines <-chan string, all *strings.Builder, re *regexp.Regexp) []string {
	t.Helper()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("sofa ended before a line matching %s:\n%s", re, all.String())
			}
			all.WriteString(l + "\n")
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-ctx.Done():
			t.Fatalf("no line matching %s:\n%s", re, all.String())
		}
	}
}
