package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// replicator is a running continuous replication: a child process (sofa,
// node) or a CouchDB replication job (cancelled through the server).
type replicator struct {
	cmd    *exec.Cmd
	log    *os.File
	cancel func()
}

// startProc starts name args as a child process (own process group, output
// into a log file of the scratch directory).
func (e *env) startProc(ctx context.Context, name string, args ...string) (*replicator, error) {
	log, err := os.CreateTemp(e.tmp, filepath.Base(name)+"-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = e.root
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), "NODE_NO_WARNINGS=1")
	if e.verbose {
		e.logf("$ %s %s", name, strings.Join(args, " "))
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	return &replicator{cmd: cmd, log: log}, nil
}

// startCouchReplicator starts a continuous replication on the target
// server (POST /_replicate, continuous: true).
func startCouchReplicator(ctx context.Context, tgt *server, from, to string) (*replicator, error) {
	body := map[string]any{"source": from, "target": to, "continuous": true}
	b, _ := json.Marshal(body)
	req, err := newRequest(ctx, http.MethodPost, tgt.URL+"/_replicate", b)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("POST /_replicate: HTTP %d", resp.StatusCode)
	}
	return &replicator{cancel: func() {
		body["cancel"] = true
		b, _ := json.Marshal(body)
		if req, err := newRequest(context.Background(), http.MethodPost, tgt.URL+"/_replicate", b); err == nil {
			if resp, err := httpClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}}, nil
}

// cpuMS is the replicator process's CPU time so far (0: none, or a job
// inside a server, counted in the servers' CPU).
func (r *replicator) cpuMS() int64 {
	if r == nil || r.cmd == nil || r.cmd.Process == nil {
		return 0
	}
	return procCPU(r.cmd.Process.Pid)
}

// stop ends the replication: SIGTERM to the process (SIGKILL after 15 s).
func (r *replicator) stop() {
	if r == nil {
		return
	}
	if r.cancel != nil {
		r.cancel()
	}
	if r.cmd == nil {
		return
	}
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	r.log.Close()
}

// logTail is the end of the replicator process's output.
func (r *replicator) logTail() string {
	if r == nil || r.log == nil {
		return "-"
	}
	b, _ := os.ReadFile(r.log.Name())
	if len(b) > 1000 {
		b = b[len(b)-1000:]
	}
	return strings.TrimSpace(string(b))
}

// procCPU is a process's user + system CPU time (ms) from /proc.
func procCPU(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b)[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return (u + s) * 10
}

func serversCPU(s []*server) int64 {
	var n int64
	for _, v := range s {
		c, _ := v.usage()
		n += c
	}
	return n
}

// sourceConns counts the TCP connections of process pid to 127.0.0.1:port
// (its socket inodes in /proc/PID/fd matched against /proc/net/tcp).
func sourceConns(pid, port int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	inodes := map[string]bool{}
	for _, e := range ents {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return 0
	}
	want := fmt.Sprintf(":%04X", port)
	// Distinct inodes: /proc/net/tcp is read page by page, and a socket
	// moved in the table between two reads is listed twice (seen on a
	// loaded machine: 7 for 2 connections).
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		// sl local rem st ... inode (field 9)
		if len(f) > 9 && strings.HasSuffix(f[2], want) && f[3] == "01" && inodes[f[9]] {
			seen[f[9]] = true
		}
	}
	return len(seen)
}

// serverPort is the TCP port of a server URL.
func serverPort(u string) int {
	p, err := url.Parse(u)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p.Port())
	return n
}
