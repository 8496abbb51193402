package couch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sofadb/sofa/replicate"
)

// Vendor says which server software answered the welcome request.
type Vendor int

const (
	VendorUnknown Vendor = iota
	VendorCouchDB        // Apache CouchDB (or Cloudant): "couchdb":"Welcome"
	VendorPouchDB        // PouchDB Server: "express-pouchdb":"Welcome!"
)

func (v Vendor) String() string {
	switch v {
	case VendorCouchDB:
		return "couchdb"
	case VendorPouchDB:
		return "pouchdb-server"
	}
	return "unknown"
}

// Server is a CouchDB server as probed: its welcome answer and identity.
type Server struct {
	*Client
	Vendor  Vendor
	Version string
	UUID    string // server uuid, "" if not given
	// noRevsLimit: the server answered 404 to `_revs_limit` (PouchDB
	// Server has no such route); it is not asked again.
	noRevsLimit atomic.Bool
	revsLimitMu sync.Mutex // PouchDB Server: one `_revs_limit` read at a time until the 404 is known
	// freshSecurity is the `_security` object of a database this client
	// created, before anything set it: the server's default for new
	// databases (`{}` on CouchDB 2.x and PouchDB Server, admin-only on
	// CouchDB 3.x). Nil until learned; see DB.SetMetadata.
	freshSecurity atomic.Pointer[any]
	freshSecMu    sync.Mutex // one reader of freshSecurity at a time
	// infoB batches DB.InfoBatched calls into `_dbs_info` requests.
	infoB infoBatcher
}

// Endpoint is a probed URL: a server, or a database on a server.
type Endpoint struct {
	Server *Server
	DBName string // decoded db name; "" for a server URL
}

// Probe opens a server or database URL once: the server's welcome (`GET /`)
// gives vendor, version and uuid; a URL with a path is a database when
// `GET /db` answers JSON with `db_name` (a missing database gives a DB
// with Exists false via DB.Info). Errors name the URL without credentials.
func Probe(ctx context.Context, rawURL string, opts Options) (*Endpoint, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("invalid URL %q: %w", RedactURL(rawURL), stripURLError(err))
	}
	// The database is the last path segment; anything before is a prefix.
	p := strings.TrimRight(u.EscapedPath(), "/")
	dbEsc := ""
	if i := strings.LastIndexByte(p, '/'); i >= 0 && p[i+1:] != "" {
		dbEsc = p[i+1:]
	}
	serverURL := *u
	stats := &Counters{}
	if dbEsc != "" {
		prefix := p[:len(p)-len(dbEsc)-1]
		dec, err := url.PathUnescape(prefix)
		if err != nil {
			return nil, fmt.Errorf("invalid URL %q: %w", RedactURL(rawURL), err)
		}
		serverURL.Path, serverURL.RawPath = dec, prefix
		// The URL itself first: its credentials go to no path above it
		// (a proxy's other applications) until it has shown itself a
		// database of the server there (RFC 7617's protection space).
		ep, err := probeSelf(ctx, u, opts, stats)
		if ep != nil || err != nil {
			return ep, err
		}
	}
	c, err := NewClient(serverURL.String(), opts)
	if err != nil {
		return nil, err
	}
	c.Stats = stats // the probe's requests count too
	s := &Server{Client: c}
	if err := s.welcome(ctx); err != nil {
		if hint := slashHint(serverURL.Path, dbEsc, err); hint != "" {
			return nil, fmt.Errorf("%w (%s)", err, hint)
		}
		return nil, err
	}
	ep := &Endpoint{Server: s}
	if dbEsc != "" {
		name, err := url.PathUnescape(dbEsc)
		if err != nil {
			return nil, fmt.Errorf("invalid database name in %q: %w", RedactURL(rawURL), err)
		}
		ep.DBName = name
	}
	return ep, nil
}

// probeSelf asks the URL u, whose path has a last segment, what it is,
// before any request goes to its parent path (on a host whose root may
// belong to another application, behind a proxy's path prefix). It asks
// with basic authentication, or, with Options.Auth AuthCookie (whose
// password goes in logins only), anonymously:
//   - a welcome: a server behind the prefix (http://host/couch), returned;
//   - a database's info, or CouchDB's JSON error about a database (404
//     not_found, 403 forbidden, ...): nil, nil, and u is taken for a
//     database of the server at its parent;
//   - CouchDB's 401: the credentials' refusal (or their absence), the
//     error naming u; anonymously asked (cookie mode), nil, nil when a
//     CouchDB answers at the parent (anonymously too), else a server at
//     u that requires a login if a login there works (returned), else
//     the error;
//   - anything else (no answer, a proxy's own error page, a 5xx): the
//     error naming u, nothing sent to the parent.
func probeSelf(ctx context.Context, u *url.URL, opts Options, stats *Counters) (*Endpoint, error) {
	self, asked := opts, *u
	self.Auth = AuthBasic
	if opts.Auth == AuthCookie {
		asked.User = nil
	}
	c, err := NewClient(asked.String(), self)
	if err != nil {
		return nil, err
	}
	c.Stats = stats
	s := &Server{Client: c}
	err = s.welcome(ctx)
	var ce *Error
	couchErr := errors.As(err, &ce) && ce.Name != "" // CouchDB's JSON error
	switch {
	case err == nil:
		return serverAt(u, opts, stats, s)
	case errors.Is(err, errNotCouch), couchErr && ce.Status != 401:
		return nil, nil
	case couchErr && opts.Auth == AuthCookie && u.User != nil:
		// asked anonymously: a database that needs a login, or a server
		// that does (require_valid_user). A CouchDB at the parent (its
		// welcome, or its 401, asked anonymously too) holds the database;
		// else only a login at u itself can tell.
		if parentIsCouch(ctx, u, self, stats) {
			return nil, nil
		}
		if ls, ok := loginAt(ctx, u, opts, stats); ok {
			return &Endpoint{Server: ls}, nil
		}
	}
	return nil, err
}

// parentIsCouch asks u's parent path anonymously for its welcome: true
// when a CouchDB server answers (its welcome, or its JSON 401 under
// require_valid_user).
func parentIsCouch(ctx context.Context, u *url.URL, opts Options, stats *Counters) bool {
	p := *u
	p.User = nil
	esc := strings.TrimRight(u.EscapedPath(), "/")
	prefix := esc[:strings.LastIndexByte(esc, '/')]
	dec, err := url.PathUnescape(prefix)
	if err != nil {
		return false
	}
	p.Path, p.RawPath = dec, prefix
	c, err := NewClient(p.String(), opts)
	if err != nil {
		return false
	}
	c.Stats = stats
	err = (&Server{Client: c}).welcome(ctx)
	var ce *Error
	return err == nil || errors.As(err, &ce) && ce.Name != "" && ce.Status == 401
}

// serverAt is the server at u, found by s's welcome, with the caller's
// authentication mode.
func serverAt(u *url.URL, opts Options, stats *Counters, s *Server) (*Endpoint, error) {
	c, err := NewClient(u.String(), opts)
	if err != nil {
		return nil, err
	}
	c.Stats = stats
	return &Endpoint{Server: &Server{Client: c, Vendor: s.Vendor, Version: s.Version, UUID: s.UUID}}, nil
}

// loginAt logs in at u's `_session` (cookie mode) and reads the welcome
// with the session: a server behind a path prefix that requires a login
// (require_valid_user) answers both. Any failure is false (u is then no
// server: a database's path refuses the login).
func loginAt(ctx context.Context, u *url.URL, opts Options, stats *Counters) (*Server, bool) {
	quiet := opts
	quiet.Log = nil // a database's path has no _session: nothing to say
	c, err := NewClient(u.String(), quiet)
	if err != nil {
		return nil, false
	}
	c.Stats = stats
	c.sess.mu.Lock()
	lerr := c.loginLocked(ctx)
	ok := lerr == nil && c.sess.cookie != ""
	c.sess.mu.Unlock()
	if !ok {
		return nil, false
	}
	s := &Server{Client: c}
	if s.welcome(ctx) != nil {
		return nil, false
	}
	ep, err := serverAt(u, opts, stats, s) // logs in again, with the caller's log
	if err != nil {
		return nil, false
	}
	return ep.Server, true
}

// errNotCouch: the URL answered, but not with a CouchDB welcome.
var errNotCouch = errors.New("not a CouchDB server")

// slashHint: a URL of two or more path segments names a database (the
// last) under a prefix (the rest), as behind a proxy; when the prefix did
// not answer as a server (404, or not a welcome), the user likely meant a
// database whose name holds "/", which a URL spells %2F. It returns that
// hint, or "" when it does not apply.
func slashHint(prefix, dbEsc string, err error) string {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" || dbEsc == "" || StatusOf(err) != 404 && !errors.Is(err, errNotCouch) {
		return ""
	}
	name, uerr := url.PathUnescape(dbEsc)
	if uerr != nil {
		return ""
	}
	full := prefix + "/" + name
	return fmt.Sprintf("a database named %q is written %s in a URL: each / in a name as %%2F", full, url.PathEscape(full))
}

func (s *Server) welcome(ctx context.Context) error {
	// A probe fails faster than other requests: at most 5 s of retries,
	// or Options.RetryTime when shorter (a negative one, no retries, is
	// no override and applies as is).
	rt := min(5*time.Second, s.opts.RetryTime)
	resp, err := s.do(ctx, &request{Method: "GET", Path: "/", RetryTime: rt, AttemptTimeout: welcomeAttemptTimeout})
	if err != nil {
		return s.describe(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return s.describe(&NetError{Op: "GET /", Err: err})
	}
	var w map[string]any
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("%s: %w (the welcome answer is not JSON)", s.URL(), errNotCouch)
	}
	switch {
	case w["couchdb"] != nil:
		s.Vendor = VendorCouchDB
	case w["express-pouchdb"] != nil:
		s.Vendor = VendorPouchDB
	default:
		return fmt.Errorf("%s: %w (no welcome in its answer)", s.URL(), errNotCouch)
	}
	s.Version, _ = w["version"].(string)
	s.UUID, _ = w["uuid"].(string)
	return nil
}

// welcomeAttemptTimeout bounds one attempt of the welcome (`GET /`): a
// server answers it at once, so one that accepts the connection and stays
// silent is given up on sooner than Options.AttemptTimeout.
var welcomeAttemptTimeout = 20 * time.Second

// describe turns low-level errors into one line naming the server.
func (s *Server) describe(err error) error {
	switch st := StatusOf(err); st {
	case 401:
		return fmt.Errorf("%s: %w", s.URL(), s.authErr(err))
	case 403:
		return fmt.Errorf("%s: access forbidden (HTTP 403): %w", s.URL(), err)
	case 0:
		if errors.Is(err, errAttemptTimeout) {
			return fmt.Errorf("%s: connected, but no answer in time: %w", s.URL(), err)
		}
		return fmt.Errorf("%s: cannot connect: %w", s.URL(), err)
	}
	return fmt.Errorf("%s: %w", s.URL(), err)
}

// StoredName is the name the server keeps database name under, as `GET
// /db` reports it (db_name). CouchDB keeps names as given; PouchDB Server
// drops every "/" ("a/b" is kept, and listed by _all_dbs, as "ab", and
// still found as "a/b").
func (s *Server) StoredName(ctx context.Context, name string) (string, error) {
	d := s.DB(name)
	resp, err := s.do(ctx, &request{Method: "GET", Path: d.path})
	if err != nil {
		return "", d.fail("open database", err)
	}
	defer resp.Body.Close()
	var info struct {
		DBName string `json:"db_name"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || info.DBName == "" {
		return "", fmt.Errorf("%s: not a CouchDB database (GET answered without db_name)", d)
	}
	return info.DBName, nil
}

// StoredAs is the name the server keeps a database created as name
// under, as far as it is known without asking (StoredName asks, for a
// database that exists): CouchDB keeps every name as given; PouchDB
// Server drops every "/" ("a/b" and "ab" are one database there). Two
// names with the same StoredAs are one database on the server.
func (s *Server) StoredAs(name string) string {
	if s.Vendor == VendorPouchDB {
		return strings.ReplaceAll(name, "/", "")
	}
	return name
}

// DB returns a handle on the named database (decoded name).
func (s *Server) DB(name string) *DB { return s.OpenDB(name, DBOptions{}) }

// DBOptions configure a database handle; they are fixed once it is open.
type DBOptions struct {
	// ReadOnly makes PutLocal refuse with replicate.ErrReadOnly without a
	// request (backup sources are never written).
	ReadOnly bool
	// Fresh marks a database this process has just created (still
	// empty): properties it has by default are not written again.
	Fresh bool
	// InlineMax is the largest total of identity-encoded attachment bytes
	// of one revision that is inlined as base64 in `_bulk_docs`; larger or
	// gzip-encoded attachments go as multipart/related PUT. Zero: 64 KiB
	// on CouchDB; PouchDB Server always inlines (it takes no multipart).
	InlineMax int64
	// ChangesPage is the number of rows asked per `_changes` request
	// (`limit`): pages let writes start before a large feed is computed
	// whole. Zero: the client's Options.ChangesPage, else the server's
	// Caps.ChangesPage; negative: one unpaged request.
	ChangesPage int
	// Multipart writes every revision that carries attachment bytes as a
	// multipart/related PUT, whatever the server (CouchDB's replicator
	// path; PouchDB Server takes it too for identity-encoded bytes).
	Multipart bool
}

// OpenDB returns a handle on the named database (decoded name) with o.
func (s *Server) OpenDB(name string, o DBOptions) *DB {
	return &DB{srv: s, name: name, path: "/" + EscapeDB(name), readOnly: o.ReadOnly, fresh: o.Fresh,
		inlineMax: o.InlineMax, changesPage: o.ChangesPage, multipart: o.Multipart}
}

// AllDBs lists database names after startAfter (exclusive, "" for the
// first page), at most limit (0: no limit). Servers without paging
// (PouchDB Server) return every name; the caller filters what it has seen.
func (s *Server) AllDBs(ctx context.Context, startAfter string, limit int) ([]string, error) {
	q := url.Values{}
	if startAfter != "" {
		k, _ := json.Marshal(startAfter)
		q.Set("startkey", string(k))
	}
	if limit > 0 {
		n := limit
		if startAfter != "" {
			n++ // startkey is inclusive
		}
		q.Set("limit", strconv.Itoa(n))
	}
	resp, err := s.do(ctx, &request{Method: "GET", Path: "/_all_dbs", Query: q.Encode()})
	if err != nil {
		if Denied(err) && !s.noPass {
			// CouchDB lists databases to server admins only.
			return nil, fmt.Errorf("%w (listing the databases of a server needs a server admin's credentials; a database URL needs only that database's)", s.describe(err))
		}
		return nil, s.describe(err)
	}
	defer resp.Body.Close()
	var names []string
	if err := json.NewDecoder(resp.Body).Decode(&names); err != nil {
		return nil, fmt.Errorf("%s: GET /_all_dbs: bad answer: %w", s.URL(), err)
	}
	if startAfter != "" {
		out := names[:0]
		for _, n := range names {
			if n > startAfter {
				out = append(out, n)
			}
		}
		names = out
	}
	return names, nil
}

// CreateOptions are database creation parameters (query string of
// `PUT /db`).
type CreateOptions = replicate.CreateOptions

// ErrExists is returned by CreateDB when the database already exists
// (replicate.ErrExists).
var ErrExists = replicate.ErrExists

var _ replicate.SourceServer = (*Server)(nil)
var _ replicate.TargetServer = (*Server)(nil)

// ServerCaps: a CouchDB server keeps checkpoints, reports counts (many at once
// through `_dbs_info` where it has it: InfoBatched falls back to GET /db)
// and serves many databases at once.
func (s *Server) ServerCaps() replicate.ServerCaps {
	return replicate.ServerCaps{Checkpoints: true, Counts: true, DBsInfo: true, Seek: true}
}

// OpenSource is OpenDB as a replicate.Source.
func (s *Server) OpenSource(ctx context.Context, name string, readOnly bool) (replicate.Source, error) {
	return s.OpenDB(name, DBOptions{ReadOnly: readOnly}), nil
}

// OpenTarget is OpenDB as a replicate.Target.
func (s *Server) OpenTarget(ctx context.Context, name string, created bool) (replicate.Target, error) {
	return s.OpenDB(name, DBOptions{Fresh: created}), nil
}

// CreateDBAfterDelete is CreateDB of a database the caller has just
// deleted: CouchDB may answer 412 (file_exists) for a while after a
// delete while the database no longer exists (its cache of databases
// lags), so a 412 is retried, with a growing wait, as long as `GET /db`
// says 404, for up to recreateWait. ErrExists when the database exists
// (another client created it meanwhile).
func (s *Server) CreateDBAfterDelete(ctx context.Context, name string, o CreateOptions) error {
	wait, deadline := 20*time.Millisecond, time.Now().Add(recreateWait)
	for {
		err := s.CreateDB(ctx, name, o)
		if !errors.Is(err, ErrExists) {
			return err
		}
		if _, ierr := s.DB(name).Info(ctx); !errors.Is(ierr, replicate.ErrNotFound) {
			if ierr != nil {
				return ierr
			}
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("create database %q on %s: it does not exist, but the server answered 412 file_exists for %s after its delete: %w", name, s.URL(), recreateWait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// recreateWait bounds CreateDBAfterDelete's retries.
var recreateWait = 30 * time.Second

// CreateDB creates a database. ErrExists if it exists (HTTP 412).
func (s *Server) CreateDB(ctx context.Context, name string, o CreateOptions) error {
	q := url.Values{}
	if o.Partitioned {
		q.Set("partitioned", "true")
	}
	if o.Q > 0 {
		q.Set("q", strconv.Itoa(o.Q))
	}
	if o.N > 0 {
		q.Set("n", strconv.Itoa(o.N))
	}
	resp, err := s.do(ctx, &request{Method: "PUT", Path: "/" + EscapeDB(name), Query: q.Encode()})
	if err != nil {
		if StatusOf(err) == 412 {
			return ErrExists
		}
		if Denied(err) {
			return fmt.Errorf("create database %q on %s: refused (creating databases takes a server admin): %w", name, s.URL(), err)
		}
		return fmt.Errorf("create database %q on %s: %w", name, s.URL(), err)
	}
	resp.Body.Close()
	return nil
}
