// Command measure runs a command and reports its wall time, CPU time and
// peak resident set size as one JSON line, for benchmarks on machines
// without GNU time.
//
//	measure [-label NAME] [-o FILE] -- COMMAND [ARG...]
//
// The command's stdin, stdout and stderr are passed through. The report
// goes to stderr, or is appended to FILE with -o:
//
//	{"label":"pouchdb","cmd":"node bench/pouchdb-replicate.js ...","exit":0,
//	 "wall_ms":1234,"user_ms":900,"sys_ms":120,"cpu_ms":1020,"max_rss_kb":81234}
//
// CPU time and max_rss_kb come from wait4's rusage, so they cover the
// command and every descendant it waited for; max_rss_kb is the largest
// single process, in KiB (Linux). measure exits with the command's status
// (1 if it could not be started, 2 on a usage error).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type report struct {
	Label    string `json:"label,omitempty"`
	Cmd      string `json:"cmd"`
	Exit     int    `json:"exit"`
	WallMS   int64  `json:"wall_ms"`
	UserMS   int64  `json:"user_ms"`
	SysMS    int64  `json:"sys_ms"`
	CPUMS    int64  `json:"cpu_ms"`
	MaxRSSKB int64  `json:"max_rss_kb"`
}

func main() {
	fs := flag.NewFlagSet("measure", flag.ContinueOnError)
	label := fs.String("label", "", "label copied into the report")
	out := fs.String("o", "", "append the report to this file instead of writing it to stderr")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "Usage: measure [-label NAME] [-o FILE] -- COMMAND [ARG...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() == 0 {
		fs.Usage()
		os.Exit(2)
	}
	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr

	// Forward interrupts to the child; measure itself waits for it.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "measure:", err)
		os.Exit(1)
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	wall := time.Since(start)
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		fmt.Fprintln(os.Stderr, "measure:", err)
		os.Exit(1)
	}
	st := cmd.ProcessState
	r := report{
		Label:  *label,
		Cmd:    strings.Join(fs.Args(), " "),
		Exit:   st.ExitCode(),
		WallMS: wall.Milliseconds(),
		UserMS: st.UserTime().Milliseconds(),
		SysMS:  st.SystemTime().Milliseconds(),
	}
	r.CPUMS = r.UserMS + r.SysMS
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		r.MaxRSSKB = ru.Maxrss
	}
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(r) // cannot fail for this struct
	line := []byte(buf.String())
	if *out == "" {
		os.Stderr.Write(line)
	} else if f, err := os.OpenFile(*out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "measure:", err)
	} else {
		_, _ = f.Write(line)
		_ = f.Close()
	}
	code := r.Exit
	if code < 0 { // killed by a signal
		code = 128 + int(st.Sys().(syscall.WaitStatus).Signal())
	}
	os.Exit(code)
}
