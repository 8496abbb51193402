package couch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
)

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
	u, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
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
		c.CloseIdleConnections()
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
	defer c.CloseIdleConnections() // never returned: a server found gets its own client
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
	defer c.CloseIdleConnections()
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
	defer c.CloseIdleConnections() // the server found gets its own client
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
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s: %w", s.URL(), err) // the caller's: no connection failed
		}
		if errors.Is(err, errAttemptTimeout) {
			return fmt.Errorf("%s: connected, but no answer in time: %w", s.URL(), err)
		}
		return fmt.Errorf("%s: cannot connect: %w", s.URL(), err)
	}
	return fmt.Errorf("%s: %w", s.URL(), err)
}
