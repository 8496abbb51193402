package couchtest

import (
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultCouchAdmin is the admin user of a CouchDB started without
// Options.AdminUser (CouchDB 3 has no admin party).
const DefaultCouchAdmin = "admin"

// launchCouch starts one CouchDB from the run's release in its own
// temporary directory (data, config, log) on a free loopback port, single
// node, logging warnings only.
func launchCouch(ctx context.Context, opts Options) (*Server, error) {
	rel, err := unpackedRelease()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("couchtest: find free port: %w", err)
	}
	dir, err := os.MkdirTemp("", "couchtest-couchdb-*")
	if err != nil {
		return nil, fmt.Errorf("couchtest: temp dir: %w", err)
	}
	uuid := randomHex()
	admin, pw := opts.AdminUser, opts.AdminPassword
	if admin == "" {
		admin, pw = DefaultCouchAdmin, randomHex()
	}
	if err := writeCouchConfig(rel, dir, port, uuid, admin, pw, opts.Config); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{
		Kind:          CouchDB,
		URL:           "http://127.0.0.1:" + strconv.Itoa(port),
		AdminUser:     admin,
		AdminPassword: pw,
		uuid:          uuid,
		dir:           dir,
		logs:          newTailBuffer(8 << 10),
		done:          make(chan struct{}),
	}
	if opts.AdminUser == "" {
		s.embedAdmin()
	}
	iniFiles := filepath.Join(rel, "etc", "default.ini")
	if _, err := os.Stat(filepath.Join(rel, "etc", "default.d")); err == nil {
		iniFiles += " " + filepath.Join(rel, "etc", "default.d")
	}
	iniFiles += " " + filepath.Join(dir, "local.ini")
	s.newCmd = func() *exec.Cmd {
		cmd := exec.Command(filepath.Join(rel, "bin", "couchdb"))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(),
			"COUCHDB_ARGS_FILE="+filepath.Join(dir, "vm.args"),
			"COUCHDB_INI_FILES="+iniFiles,
			"ERL_CRASH_DUMP="+filepath.Join(dir, "erl_crash.dump"),
			"HOME="+dir,
		)
		cmd.Stdout = s.logs
		cmd.Stderr = s.logs
		cmd.SysProcAttr = procAttr()
		return cmd
	}
	if err := s.run(ctx, s.newCmd(), "couchdb", "/_up"); err != nil {
		return nil, err
	}
	if err := s.waitSystemDBs(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.setupUsers(ctx, opts); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// waitSystemDBs waits until _users and _replicator exist: a single node
// creates them some time after it answers /_up.
func (s *Server) waitSystemDBs(ctx context.Context) error {
	c := s.Client()
	c.HTTP = &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var dbs []string
		if err := c.GetJSON(ctx, "/_all_dbs", &dbs); err == nil && slices.Contains(dbs, "_users") && slices.Contains(dbs, "_replicator") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("couchtest: CouchDB at %s did not create _users and _replicator: %w; output: %s", s.baseURL(), ctx.Err(), s.logs.String())
		case <-tick.C:
		}
	}
}

// embedAdmin puts the admin's credentials into URL, so that tests written
// for an admin-party server (PouchDB Server without Options.AdminUser) get
// a URL that works as it is.
func (s *Server) embedAdmin() {
	u, _ := url.Parse(s.URL)
	u.User = url.UserPassword(s.AdminUser, s.AdminPassword)
	s.URL = u.String()
}

func writeCouchConfig(rel, dir string, port int, uuid, admin, pw string, extra map[string]string) error {
	secret := randomHex()
	var ini strings.Builder
	fmt.Fprintf(&ini, "[couchdb]\nsingle_node = true\nuuid = %s\ndatabase_dir = %s\nview_index_dir = %s\n\n", uuid, filepath.Join(dir, "data"), filepath.Join(dir, "data"))
	fmt.Fprintf(&ini, "[cluster]\nn = 1\n\n[chttpd]\nbind_address = 127.0.0.1\nport = %d\n\n", port)
	fmt.Fprintf(&ini, "[couch_httpd_auth]\nsecret = %s\n\n[chttpd_auth]\nsecret = %s\n\n", secret, secret)
	fmt.Fprintf(&ini, "[smoosh]\nstate_dir = %s\n\n[log]\nwriter = stderr\nlevel = warning\n\n", filepath.Join(dir, "data"))
	// The password is stored hashed, as CouchDB would after hashing a
	// plain one, which it does only some time after start-up (requests
	// are refused meanwhile), and with few iterations, since every basic
	// auth request costs one hash.
	fmt.Fprintf(&ini, "[admins]\n%s = %s\n", admin, couchPasswordHash(pw))
	// Extra settings, grouped by section; a later section repeats win in
	// CouchDB's ini reader.
	bySection := map[string][]string{}
	for k, v := range extra {
		sec, key, ok := strings.Cut(k, "/")
		if !ok {
			return fmt.Errorf("couchtest: Options.Config key %q: want section/key", k)
		}
		bySection[sec] = append(bySection[sec], key+" = "+v)
	}
	secs := make([]string, 0, len(bySection))
	for s := range bySection {
		secs = append(secs, s)
	}
	sort.Strings(secs)
	for _, sec := range secs {
		sort.Strings(bySection[sec])
		fmt.Fprintf(&ini, "\n[%s]\n%s\n", sec, strings.Join(bySection[sec], "\n"))
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return fmt.Errorf("couchtest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "local.ini"), []byte(ini.String()), 0o600); err != nil {
		return fmt.Errorf("couchtest: write local.ini: %w", err)
	}
	// vm.args: the release's, with a node name and cookie of our own so
	// that instances coexist.
	base, err := os.ReadFile(filepath.Join(rel, "etc", "vm.args"))
	if err != nil {
		return fmt.Errorf("couchtest: read vm.args: %w", err)
	}
	var args strings.Builder
	fmt.Fprintf(&args, "-name couchtest_%d@127.0.0.1\n-setcookie %s\n", port, randomHex())
	for _, line := range strings.Split(string(base), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "-name" || f[0] == "-sname" || f[0] == "-setcookie") {
			continue
		}
		args.WriteString(line + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "vm.args"), []byte(args.String()), 0o600); err != nil {
		return fmt.Errorf("couchtest: write vm.args: %w", err)
	}
	return nil
}

var release struct {
	once sync.Once
	dir  string
	err  error
}

// unpackedRelease returns a directory holding bin/couchdb: the release
// itself when it is a directory, else the tarball unpacked once into a
// cache directory under the system's temp dir (shared by test binaries,
// keyed by the tarball's path, size and time; unpacked to a temporary
// name and renamed, so concurrent binaries never see half a release).
func unpackedRelease() (string, error) {
	release.once.Do(func() { release.dir, release.err = unpack() })
	return release.dir, release.err
}

func unpack() (string, error) {
	rel, err := couchRelease()
	if err != nil {
		return "", fmt.Errorf("couchtest: %w", err)
	}
	fi, err := os.Stat(rel)
	if err != nil {
		return "", fmt.Errorf("couchtest: %w", err)
	}
	if fi.IsDir() {
		if _, err := os.Stat(filepath.Join(rel, "bin", "couchdb")); err != nil {
			return "", fmt.Errorf("couchtest: %s holds no bin/couchdb", rel)
		}
		return rel, nil
	}
	abs, _ := filepath.Abs(rel)
	key := fmt.Sprintf("%s|%d|%d", abs, fi.Size(), fi.ModTime().UnixNano())
	dst := filepath.Join(os.TempDir(), "sofa-couchdb-"+shortHash(key))
	if _, err := os.Stat(filepath.Join(dst, "bin", "couchdb")); err == nil {
		return dst, nil
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "sofa-couchdb-unpack-*")
	if err != nil {
		return "", fmt.Errorf("couchtest: %w", err)
	}
	flag := "-xf"
	if strings.HasSuffix(rel, ".gz") || strings.HasSuffix(rel, ".tgz") {
		flag = "-xzf"
	}
	if out, err := exec.Command("tar", flag, abs, "--strip-components=1", "-C", tmp).CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("couchtest: unpack %s: %w: %s", rel, err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, dst); err != nil {
		// Another test binary won the race: use its copy.
		os.RemoveAll(tmp)
		if _, serr := os.Stat(filepath.Join(dst, "bin", "couchdb")); serr != nil {
			return "", fmt.Errorf("couchtest: install release into %s: %w", dst, err)
		}
	}
	return dst, nil
}

// couchPasswordHash returns pw in CouchDB's [admins] format
// (-pbkdf2:sha256-DERIVED,SALT,ITERATIONS; the salt is used as the text it
// is).
func couchPasswordHash(pw string) string {
	const iterations = 10
	salt := randomHex()
	key, err := pbkdf2.Key(sha256.New, pw, []byte(salt), iterations, 32)
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf("-pbkdf2:sha256-%s,%s,%d", hex.EncodeToString(key), salt, iterations)
}

func randomHex() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
