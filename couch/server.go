package couch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
