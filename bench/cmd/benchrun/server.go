package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
)

// Server kinds of -server.
const (
	kindPouchDB = "pouchdb"
	kindCouchDB = "couchdb"
)

// server is one server of a benchmark: an in-memory PouchDB Server child
// process on a loopback port, or a CouchDB (started from the release by
// internal/couchtest, or one of the running servers of -server-url).
type server struct {
	// URL is http://127.0.0.1:PORT without a trailing slash; on CouchDB it
	// carries the admin's credentials (http://admin:PW@127.0.0.1:PORT).
	URL  string
	Kind string // kindPouchDB or kindCouchDB
	cmd  *exec.Cmd
	dir  string
	ct   *couchtest.Server // CouchDB
	pid  int               // the server process (0: unknown, a running server)
}

// couch reports whether s is a CouchDB.
func (s *server) couch() bool { return s.Kind == kindCouchDB }

// reductions is a CouchDB server's Erlang reductions so far (its
// /_node/_local/_system); 0 for another server or on error.
func (s *server) reductions(ctx context.Context) int64 {
	if s == nil || !s.couch() {
		return 0
	}
	var sys struct {
		Reductions int64 `json:"reductions"`
	}
	if err := getJSON(ctx, s.URL+"/_node/_local/_system", &sys); err != nil {
		return 0
	}
	return sys.Reductions
}

// startServer starts a fresh server of the run's kind (-server): CouchDB
// through couchtest.StartServer (single node, [log] level = warning, a
// running server of -server-url wiped first), or `pouchdb-server
// --in-memory` in a fresh temporary directory (it writes config.json and
// log.txt into its cwd), waiting up to 20 s for it to answer GET /.
func (e *env) startServer(ctx context.Context) (*server, error) {
	if e.cfg.server == kindCouchDB {
		ct, err := couchtest.StartServer(ctx, couchtest.Options{Kind: couchtest.CouchDB})
		if err != nil {
			return nil, fmt.Errorf("start CouchDB: %w", err)
		}
		s := &server{URL: ct.URL, Kind: kindCouchDB, ct: ct, pid: ct.Pid()}
		e.servers = append(e.servers, s)
		return s, nil
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(e.tmp, "pouchdb-")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(e.root, "node_modules", ".bin", "pouchdb-server")
	cmd := exec.Command(bin, "--in-memory", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "-n")
	cmd.Dir = dir
	log, err := os.Create(filepath.Join(dir, "out.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start pouchdb-server: %w", err)
	}
	log.Close()
	s := &server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Kind: kindPouchDB, cmd: cmd, dir: dir, pid: cmd.Process.Pid}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			s.stop()
			return nil, err
		}
		if resp, err := http.Get(s.URL + "/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				e.servers = append(e.servers, s)
				return s, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, _ := os.ReadFile(filepath.Join(dir, "out.log"))
	s.stop()
	return nil, fmt.Errorf("pouchdb-server did not answer on %s within 20s: %s", s.URL, strings.TrimSpace(string(out)))
}

// stop kills the server, waits for it and removes its directory. Safe to
// call twice.
func (s *server) stop() {
	if s != nil && s.ct != nil {
		_ = s.ct.Stop()
		s.ct, s.pid = nil, 0
		return
	}
	if s == nil || s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd, s.pid = nil, 0
	_ = os.RemoveAll(s.dir)
}

// usage is the server process's CPU time so far (ms) and its resident set
// now (KiB), from /proc; zeros where /proc is unavailable.
func (s *server) usage() (cpuMS, rssKB int64) {
	if s == nil || s.pid == 0 {
		return 0, 0
	}
	pid := s.pid
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// Fields after the parenthesised command name; utime and stime
		// are fields 14 and 15 (1-based), in clock ticks of 10 ms.
		if i := strings.LastIndexByte(string(b), ')'); i > 0 {
			f := strings.Fields(string(b)[i+1:])
			if len(f) > 13 {
				u, _ := strconv.ParseInt(f[11], 10, 64)
				st, _ := strconv.ParseInt(f[12], 10, 64)
				cpuMS = (u + st) * 10
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "VmRSS:") {
				f := strings.Fields(line)
				if len(f) >= 2 {
					rssKB, _ = strconv.ParseInt(f[1], 10, 64)
				}
			}
		}
	}
	return cpuMS, rssKB
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// stopServer stops s and forgets it.
func (e *env) stopServer(s *server) {
	s.stop()
	for i, v := range e.servers {
		if v == s {
			e.servers = append(e.servers[:i], e.servers[i+1:]...)
			break
		}
	}
}
