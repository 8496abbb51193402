package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// The CLI is compiled once per test binary and shared by every test that
// runs it as a process.
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	if out := os.Getenv(rssWrapEnv); out != "" {
		os.Exit(rssWrap(out, os.Args[1:]))
	}
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// sofaBin returns the path of the compiled sofa binary.
func sofaBin(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "sofa-cli-test-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "sofa")
		if out, err := exec.Command("go", "build", "-o", built.bin, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// rssWrapEnv makes the test binary a wrapper (see arPeakRSS): it runs the
// command of its arguments and writes the child's peak RSS in bytes to the
// file the variable names.
const rssWrapEnv = "SOFA_TEST_RSS_WRAP"

// rssWrap runs args as a child and records its ru_maxrss. The child is
// this small wrapper's, not the test process's: Linux carries the
// high-water mark of the memory a child shared with its parent (Go
// starts children with CLONE_VM) across exec, so the figure is the larger
// of the child's own peak and this wrapper's (a few MiB), never the test
// process's.
func rssWrap(out string, args []string) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	if cmd.ProcessState == nil {
		fmt.Fprintln(os.Stderr, "rss wrapper:", err)
		return 125
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		fmt.Fprintln(os.Stderr, "rss wrapper: no rusage")
		return 125
	}
	if werr := os.WriteFile(out, []byte(strconv.FormatInt(int64(ru.Maxrss)<<10, 10)), 0o644); werr != nil {
		fmt.Fprintln(os.Stderr, "rss wrapper:", werr)
		return 125
	}
	return cmd.ProcessState.ExitCode()
}
