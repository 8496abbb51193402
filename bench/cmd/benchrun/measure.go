package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// usage is what one measured command cost: wall time, CPU time (user +
// system, the command and every descendant it waited for) and the peak
// resident set of its largest single process (KiB, from wait4's rusage).
type usage struct {
	WallMS   int64 `json:"wall_ms"`
	UserMS   int64 `json:"user_ms"`
	SysMS    int64 `json:"sys_ms"`
	CPUMS    int64 `json:"cpu_ms"`
	MaxRSSKB int64 `json:"max_rss_kb"`
	Exit     int   `json:"exit"`
}

// outcome is a measured command's usage and output.
type outcome struct {
	usage
	Stdout []byte
	Stderr string // the last 2 KB of stderr
}

// lastJSON decodes the last stdout line that is a JSON object (the peers
// print one result line) or, failing that, the whole stdout (sofa --json
// prints one indented document) into v.
func (o *outcome) lastJSON(v any) error {
	out := bytes.TrimSpace(o.Stdout)
	lines := bytes.Split(out, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		l := bytes.TrimSpace(lines[i])
		if len(l) > 1 && l[0] == '{' && l[len(l)-1] == '}' {
			if json.Unmarshal(l, v) == nil {
				return nil
			}
		}
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("no JSON result in output (%d bytes)", len(out))
	}
	return nil
}

// errText summarises a failed command for a record.
func (o *outcome) errText() string {
	s := strings.TrimSpace(o.Stderr)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 && len(s)-i > 20 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[len(s)-300:]
	}
	return fmt.Sprintf("exit %d: %s", o.Exit, s)
}

// measure runs name args (in the repository root) and reports its cost. An
// error is returned only when the command could not be started; a non-zero
// exit is reported in Exit.
func (e *env) measure(ctx context.Context, timeout time.Duration, name string, args ...string) (*outcome, error) {
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The command runs under the small measure helper, not as a direct
	// child: Linux records the forking process's peak RSS into a vfork'd
	// child's ru_maxrss at exec, so a direct child would inherit this
	// driver's peak (the loaded data sets) as its own.
	report, err := os.CreateTemp(e.tmp, "measure-*.json")
	if err != nil {
		return nil, err
	}
	report.Close()
	defer os.Remove(report.Name())
	cmd := exec.CommandContext(ctx, e.measureBin, append([]string{"-o", report.Name(), "--", name}, args...)...)
	cmd.Dir = e.root
	// Own process group, so a timeout ends every process of the run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(), "NODE_NO_WARNINGS=1")
	var stdout bytes.Buffer
	stderr := &tail{max: 2048}
	cmd.Stdout = &stdout
	cmd.Stderr = stderr
	if e.verbose {
		fmt.Fprintf(os.Stderr, "benchrun: $ %s %s\n", name, strings.Join(args, " "))
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	err = cmd.Wait()
	wall := time.Since(start)
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) && !errors.Is(err, exec.ErrWaitDelay) {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	o := &outcome{Stdout: stdout.Bytes(), Stderr: string(stderr.buf)}
	o.Exit = cmd.ProcessState.ExitCode()
	if b, rerr := os.ReadFile(report.Name()); rerr == nil && len(bytes.TrimSpace(b)) > 0 {
		if jerr := json.Unmarshal(b, &o.usage); jerr != nil {
			return nil, fmt.Errorf("measure report: %w", jerr)
		}
	} else {
		o.WallMS = wall.Milliseconds() // killed before measure could report
	}
	if ctx.Err() == context.DeadlineExceeded {
		o.Stderr += fmt.Sprintf("\nbenchrun: killed after %s", timeout)
		if o.Exit == 0 {
			o.Exit = -1
		}
	}
	return o, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	buf []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}
