package main

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// machine describes the host of a run, written as the first record and
// printed, so that numbers from a loaded or different machine are
// recognisable.
func machine() map[string]any {
	m := map[string]any{
		"time": time.Now().UTC().Format(time.RFC3339), "cpus": runtime.NumCPU(),
		"goos": runtime.GOOS, "goarch": runtime.GOARCH, "go": runtime.Version(),
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m["loadavg"] = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if i := strings.IndexByte(l, ':'); i > 0 {
					m["cpu"] = strings.TrimSpace(l[i+1:])
				}
				break
			}
		}
	}
	if out, err := exec.Command("node", "--version").Output(); err == nil {
		m["node"] = strings.TrimSpace(string(out))
	}
	return m
}
