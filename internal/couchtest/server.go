package couchtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// DefaultStartTimeout is how long StartServer waits for `GET /` to answer
// when Options.StartTimeout is zero.
const DefaultStartTimeout = 60 * time.Second

// Options configures one server instance. The zero value starts a server of
// the run's kind that needs no credentials beyond its URL: PouchDB Server in
// admin party, or CouchDB with an admin whose credentials are in
// Server.URL (CouchDB 3 has no admin party).
type Options struct {
	// AdminUser and AdminPassword, when AdminUser is non-empty, create a
	// server admin through _config/admins once the server is up. From then
	// on wrong credentials are refused with 401 and admin-only actions need
	// these (see the package doc for what else is enforced).
	AdminUser     string
	AdminPassword string

	// Users maps names to passwords of non-admin users created in _users
	// after the admin. It requires AdminUser.
	Users map[string]string

	// StartTimeout bounds the wait for the server to answer; zero means
	// DefaultStartTimeout.
	StartTimeout time.Duration

	// Kind is the server to start; empty means the run's kind (RunKind).
	Kind Kind

	// Config holds CouchDB settings as "section/key" -> value (for example
	// "chttpd/max_http_request_size": "65536"), written into the
	// instance's local.ini, or set through /_node/_local/_config on a
	// server named by SOFA_COUCHDB_URL (and restored when it is handed
	// back). PouchDB Server takes none: a non-empty Config is an error there.
	Config map[string]string

	// OnDisk starts PouchDB Server with its databases in files (LevelDB
	// in the instance's directory) instead of --in-memory, so that
	// Restart keeps them. CouchDB is always on disk.
	OnDisk bool
}

// Server is one running server (a pouchdb-server or CouchDB process, or a
// CouchDB named by SOFA_COUCHDB_URL). Its methods are safe for concurrent
// use.
type Server struct {
	// Kind is the server's implementation.
	Kind Kind
	// URL is the server's base URL without a trailing slash:
	// http://127.0.0.1:PORT. It carries no credentials, except on a
	// CouchDB started without Options.AdminUser, where it carries the
	// admin's (http://admin:PW@127.0.0.1:PORT) so that it works as an
	// admin-party URL does on PouchDB Server.
	URL string
	// AdminUser and AdminPassword are the server admin's; both empty for
	// PouchDB Server in admin party.
	AdminUser     string
	AdminPassword string
	// Version is the version the server's welcome answer gives.
	Version string

	external *externalServer // set for a server named by SOFA_COUCHDB_URL

	uuid string // preset in config.json, checked in the welcome answer
	dir  string
	cmd  *exec.Cmd
	logs *tailBuffer
	done chan struct{} // closed when the process has exited
	mu   sync.Mutex
	stop bool  // Stop was called
	werr error // result of cmd.Wait
	// newCmd makes the server's command again (Restart); nil: the
	// server cannot be restarted (PouchDB Server in memory). name and
	// readyPath are run's.
	newCmd          func() *exec.Cmd
	name, readyPath string
	restarting      bool
}

// StartServer launches node_modules/.bin/pouchdb-server (found by walking up
// from the working directory to go.mod) in a new temporary directory with
// --in-memory on a free 127.0.0.1 port and stdout logs off, waits until
// `GET /` answers 200, then creates the admin and users of opts. The caller
// must call Stop. Errors name the missing binary (with the hint to run
// `make deps`), a process that exited early (with the tail of its output)
// or the timeout.
func StartServer(ctx context.Context, opts Options) (*Server, error) {
	kind := opts.Kind
	if kind == "" {
		k, err := RunKind()
		if err != nil {
			return nil, err
		}
		kind = k
	}
	if len(opts.Users) > 0 && opts.AdminUser == "" && kind == PouchDB {
		return nil, errors.New("couchtest: Options.Users needs Options.AdminUser")
	}
	var start func(context.Context, Options) (*Server, error)
	switch kind {
	case PouchDB:
		if len(opts.Config) > 0 {
			return nil, errors.New("couchtest: Options.Config is for CouchDB only")
		}
		bin, err := serverBinary()
		if err != nil {
			return nil, err
		}
		start = func(ctx context.Context, opts Options) (*Server, error) { return launch(ctx, bin, opts) }
	case CouchDB:
		if couchURLs() != nil {
			return acquireExternal(ctx, opts)
		}
		start = launchCouch
	default:
		return nil, fmt.Errorf("couchtest: unknown server kind %q", kind)
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var lastErr error
	// A port found free can be taken by someone else before the server
	// binds it; a few attempts make that race harmless.
	for attempt := 0; attempt < 3; attempt++ {
		s, err := start(ctx, opts)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func launch(ctx context.Context, bin string, opts Options) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("couchtest: find free port: %w", err)
	}
	dir, err := os.MkdirTemp("", "couchtest-*")
	if err != nil {
		return nil, fmt.Errorf("couchtest: temp dir: %w", err)
	}
	// A preset uuid lets waitReady tell this server from another process
	// that took the port first.
	var rnd [16]byte
	_, _ = rand.Read(rnd[:])
	uuid := hex.EncodeToString(rnd[:])
	cfg := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfg, []byte(`{"couchdb":{"uuid":"`+uuid+`"}}`), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("couchtest: write config: %w", err)
	}
	s := &Server{
		Kind:          PouchDB,
		uuid:          uuid,
		URL:           "http://127.0.0.1:" + strconv.Itoa(port),
		AdminUser:     opts.AdminUser,
		AdminPassword: opts.AdminPassword,
		dir:           dir,
		logs:          newTailBuffer(8 << 10),
		done:          make(chan struct{}),
	}
	newCmd := func() *exec.Cmd {
		args := []string{"--no-stdout-logs", "--no-color",
			"--host", "127.0.0.1", "--port", strconv.Itoa(port), "--config", cfg}
		if !opts.OnDisk {
			args = append([]string{"--in-memory"}, args...)
		}
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir // on disk: the databases' directories are here
		cmd.Stdout = s.logs
		cmd.Stderr = s.logs
		cmd.SysProcAttr = procAttr()
		return cmd
	}
	if opts.OnDisk {
		s.newCmd = newCmd
	}
	if err := s.run(ctx, newCmd(), "pouchdb-server", "/"); err != nil {
		return nil, err
	}
	if err := s.setupAuth(ctx, opts); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// run starts cmd (the server process, in its own process group), then
// waits until GET readyPath answers 200 and the welcome answer carries the
// uuid this instance was configured with. On failure the process is
// stopped and its directory removed.
func (s *Server) run(ctx context.Context, cmd *exec.Cmd, name, readyPath string) error {
	s.name, s.readyPath = name, readyPath
	if err := s.spawn(cmd); err != nil {
		os.RemoveAll(s.dir)
		return err
	}
	if err := s.waitReady(ctx, name, readyPath); err != nil {
		s.Stop()
		return err
	}
	return nil
}

// spawn starts cmd as the server's process, with a done channel of its
// own closed when it exits.
func (s *Server) spawn(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("couchtest: start %s: %w", s.name, err)
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.done, s.werr = cmd, done, nil
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		s.werr = err
		s.mu.Unlock()
		close(done)
	}()
	return nil
}

// doneCh is the running process's done channel.
func (s *Server) doneCh() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

func (s *Server) waitReady(ctx context.Context, name, readyPath string) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	base := s.baseURL()
	for {
		if ok, err := s.answers(ctx, hc, base, readyPath); err != nil {
			return err
		} else if ok {
			return nil
		}
		select {
		case <-s.doneCh():
			return fmt.Errorf("couchtest: %s exited before answering: %w; output: %s", name, s.waitErr(), s.logs.String())
		case <-ctx.Done():
			return fmt.Errorf("couchtest: %s at %s did not answer: %w; output: %s", name, base, ctx.Err(), s.logs.String())
		case <-tick.C:
		}
	}
}

// answers reports whether GET readyPath answers 200 and GET / then
// answers with this instance's uuid; a welcome with another uuid (another
// process took the port) is an error.
func (s *Server) answers(ctx context.Context, hc *http.Client, base, readyPath string) (bool, error) {
	get := func(path string, out any) bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(out) == nil
	}
	var up map[string]any
	if readyPath != "/" && !get(readyPath, &up) {
		return false, nil
	}
	var welcome struct {
		UUID    string `json:"uuid"`
		Version string `json:"version"`
	}
	if !get("/", &welcome) {
		return false, nil
	}
	if welcome.UUID != s.uuid {
		return false, fmt.Errorf("couchtest: port of %s answered by another server", base)
	}
	s.Version = welcome.Version
	return true, nil
}

// baseURL is URL without credentials.
func (s *Server) baseURL() string {
	u, err := url.Parse(s.URL)
	if err != nil {
		return s.URL
	}
	u.User = nil
	return u.String()
}

func (s *Server) setupAuth(ctx context.Context, opts Options) error {
	if opts.AdminUser == "" {
		return nil
	}
	anon := NewClient(s.URL)
	path := "/_config/admins/" + url.PathEscape(opts.AdminUser)
	if _, err := anon.Do(ctx, http.MethodPut, path, opts.AdminPassword, nil); err != nil {
		return fmt.Errorf("couchtest: create admin: %w", err)
	}
	return s.setupUsers(ctx, opts)
}

// setupUsers creates the non-admin users of opts in _users.
func (s *Server) setupUsers(ctx context.Context, opts Options) error {
	admin := s.Client()
	for name, pw := range opts.Users {
		if err := admin.CreateUser(ctx, name, pw); err != nil {
			return err
		}
	}
	return nil
}

// Client returns a Client for the server carrying the admin credentials, if
// any.
func (s *Server) Client() *Client {
	c := NewClient(s.baseURL())
	c.User, c.Password = s.AdminUser, s.AdminPassword
	return c
}

// UserURL returns the server URL with user and password as userinfo
// (http://user:pw@127.0.0.1:PORT); with an empty user it returns URL.
func (s *Server) UserURL(user, password string) string {
	if user == "" {
		return s.baseURL()
	}
	u, _ := url.Parse(s.URL)
	u.User = url.UserPassword(user, password)
	return u.String()
}

// AdminURL returns UserURL with the admin's credentials (the bare URL in
// PouchDB Server's admin party).
func (s *Server) AdminURL() string { return s.UserURL(s.AdminUser, s.AdminPassword) }

// DBURL returns AdminURL joined with the escaped database name.
func (s *Server) DBURL(db string) string { return s.AdminURL() + "/" + EscapeDB(db) }

// Pid is the server's process id (CouchDB's beam.smp, which the release's
// start script execs, or pouchdb-server's node), for reading its CPU time
// and resident set; 0 for a server named by SOFA_COUCHDB_URL.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Err reports a server process that exited without Stop (for example the
// crash described in the package doc), with the tail of its output; nil
// while it runs or after Stop.
func (s *Server) Err() error {
	select {
	case <-s.doneCh():
	default:
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop || s.restarting {
		return nil
	}
	return fmt.Errorf("couchtest: %s at %s exited unexpectedly: %w; output: %s", s.Kind, s.baseURL(), s.werr, s.logs.String())
}

func (s *Server) waitErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.werr
}

// Stop kills the server's process group, waits for it and removes its
// directory. It is idempotent and returns the error of Err as it was just
// before stopping.
func (s *Server) Stop() error {
	s.mu.Lock()
	ext := s.external
	s.external = nil
	s.mu.Unlock()
	if ext != nil {
		return ext.release(s)
	}
	crashed := s.Err()
	s.mu.Lock()
	already := s.stop
	s.stop = true
	s.mu.Unlock()
	if already {
		return crashed
	}
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		killGroup(cmd.Process.Pid)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
	}
	os.RemoveAll(s.dir)
	return crashed
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// RepoRoot returns the nearest directory at or above the working directory
// that holds go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("couchtest: no go.mod above the working directory")
		}
		dir = parent
	}
}

func serverBinary() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, "node_modules", ".bin", "pouchdb-server")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("couchtest: %s not found: run `make deps` first", bin)
	}
	return bin, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.b) == 0 {
		return "(none)"
	}
	return string(t.b)
}
