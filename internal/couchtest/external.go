package couchtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// ErrNoFreeServer is returned by StartServer when every server named by
// SOFA_COUCHDB_URL is in use; Start turns it into a skip.
var ErrNoFreeServer = errors.New("couchtest: every server named by " + EnvCouchURL + " is in use (name more, comma-separated, to run this test)")

// externalServer is one server named by SOFA_COUCHDB_URL.
type externalServer struct {
	raw   string
	inUse bool
	saved map[string]*string // config keys set for the current user: old value, nil = unset
}

var externals struct {
	mu   sync.Mutex
	list []*externalServer
}

// acquireExternal hands out the first free server named by
// SOFA_COUCHDB_URL, wiped: every database but _users and _replicator is
// deleted and _users keeps only its design documents. opts.Config is set
// through /_node/_local/_config and restored by Stop.
func acquireExternal(ctx context.Context, opts Options) (*Server, error) {
	externals.mu.Lock()
	if externals.list == nil {
		for _, raw := range couchURLs() {
			externals.list = append(externals.list, &externalServer{raw: raw})
		}
	}
	var ext *externalServer
	for _, e := range externals.list {
		if !e.inUse {
			ext = e
			e.inUse = true
			break
		}
	}
	externals.mu.Unlock()
	if ext == nil {
		return nil, ErrNoFreeServer
	}
	s, err := ext.open(ctx, opts)
	if err != nil {
		externals.mu.Lock()
		ext.inUse = false
		externals.mu.Unlock()
		return nil, err
	}
	return s, nil
}

func (e *externalServer) open(ctx context.Context, opts Options) (*Server, error) {
	u, err := url.Parse(e.raw)
	if err != nil || u.User == nil {
		return nil, fmt.Errorf("couchtest: %s: want http://ADMIN:PASSWORD@HOST:PORT", EnvCouchURL)
	}
	pw, _ := u.User.Password()
	s := &Server{Kind: CouchDB, AdminUser: u.User.Username(), AdminPassword: pw, external: e, logs: newTailBuffer(1)}
	u.User = nil
	s.URL = strings.TrimRight(u.String(), "/")
	c := s.Client()
	var welcome struct {
		Version string `json:"version"`
	}
	if err := c.GetJSON(ctx, "/", &welcome); err != nil {
		return nil, fmt.Errorf("couchtest: %s: %w", EnvCouchURL, err)
	}
	s.Version = welcome.Version
	if err := wipe(ctx, c); err != nil {
		return nil, err
	}
	e.saved = map[string]*string{}
	for k, v := range opts.Config {
		var old string
		path := "/_node/_local/_config/" + k
		if err := c.GetJSON(ctx, path, &old); err == nil {
			e.saved[k] = &old
		} else if StatusOf(err) == http.StatusNotFound {
			e.saved[k] = nil
		} else {
			return nil, err
		}
		if err := c.PutJSON(ctx, path, v, nil); err != nil {
			return nil, fmt.Errorf("couchtest: set %s: %w", k, err)
		}
	}
	if opts.AdminUser != "" && opts.AdminUser != s.AdminUser {
		return nil, fmt.Errorf("couchtest: Options.AdminUser %q differs from the admin of %s", opts.AdminUser, EnvCouchURL)
	}
	if opts.AdminUser == "" {
		s.embedAdmin()
	}
	if err := s.setupUsers(ctx, opts); err != nil {
		return nil, err
	}
	return s, nil
}

// wipe deletes every database but _users and _replicator, and every user
// document of _users.
func wipe(ctx context.Context, c *Client) error {
	var dbs []string
	if err := c.GetJSON(ctx, "/_all_dbs", &dbs); err != nil {
		return err
	}
	for _, db := range dbs {
		if db == "_users" || db == "_replicator" {
			continue
		}
		if err := c.DeleteDB(ctx, db); err != nil {
			return err
		}
	}
	var all struct {
		Rows []struct {
			ID    string `json:"id"`
			Value struct {
				Rev string `json:"rev"`
			} `json:"value"`
		} `json:"rows"`
	}
	if err := c.GetJSON(ctx, "/_users/_all_docs", &all); err != nil {
		return err
	}
	for _, r := range all.Rows {
		if strings.HasPrefix(r.ID, "_design/") {
			continue
		}
		if _, err := c.Do(ctx, http.MethodDelete, "/_users/"+EscapeID(r.ID)+"?rev="+url.QueryEscape(r.Value.Rev), nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// release restores the config keys set for the test and frees the server.
func (e *externalServer) release(s *Server) error {
	c := s.Client()
	var errs []error
	for k, old := range e.saved {
		path := "/_node/_local/_config/" + k
		var err error
		if old == nil {
			_, err = c.Do(context.Background(), http.MethodDelete, path, nil, nil)
		} else {
			err = c.PutJSON(context.Background(), path, *old, nil)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	externals.mu.Lock()
	e.inUse = false
	e.saved = nil
	externals.mu.Unlock()
	return errors.Join(errs...)
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}
