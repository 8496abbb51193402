package couchtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Client is a minimal CouchDB HTTP client for test setup and checks, built on
// net/http alone so that it does not depend on the code under test. The zero
// HTTP field means a client with a 2 minute timeout.
type Client struct {
	// BaseURL is the server (or database) URL without credentials and
	// without a trailing slash; request paths are appended to it verbatim.
	BaseURL string
	// User and Password, when User is non-empty, are sent as basic auth.
	User     string
	Password string
	// HTTP is the client used; nil means a default one.
	HTTP *http.Client
}

// defaultHTTP drops idle connections after 4 s: PouchDB Server (Node.js)
// closes them after 5 s, and a POST sent on a connection it is closing
// fails with EOF and is not retried (a test that idled 6 s then loaded
// more documents failed so on a loaded machine).
var defaultHTTP = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.IdleConnTimeout = 4 * time.Second
	return &http.Client{Timeout: 2 * time.Minute, Transport: t}
}()

// NewClient returns a Client for rawURL; credentials given as userinfo move
// to User and Password, so they never show up in errors.
func NewClient(rawURL string) *Client {
	c := &Client{BaseURL: strings.TrimRight(rawURL, "/")}
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		c.User = u.User.Username()
		c.Password, _ = u.User.Password()
		u.User = nil
		c.BaseURL = strings.TrimRight(u.String(), "/")
	}
	return c
}

// HTTPError is a non-2xx answer. Body holds at most the first 1 KB of the
// answer (CouchDB's {"error","reason"} object).
type HTTPError struct {
	Method string
	Path   string
	Status int
	Body   string
}

func (e *HTTPError) Error() string {
	p := e.Path
	if len(p) > 120 {
		p = p[:120] + "..."
	}
	return fmt.Sprintf("couchtest: %s %s: status %d: %s", e.Method, p, e.Status, e.Body)
}

// StatusOf returns the HTTP status carried by err (an *HTTPError), or 0.
func StatusOf(err error) int {
	if he, ok := err.(*HTTPError); ok {
		return he.Status
	}
	return 0
}

// Do sends one request to BaseURL+path. body may be nil, []byte or
// json.RawMessage (sent as is), an io.Reader (sent as is), or any other value
// (JSON-encoded). out may be nil (answer discarded), *[]byte (raw answer) or
// a pointer to decode the JSON answer into. It returns the status; statuses
// >= 300 are returned as *HTTPError after out is left untouched.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case json.RawMessage:
		rd = bytes.NewReader(b)
	case io.Reader:
		rd = b
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return 0, fmt.Errorf("couchtest: encode %s body: %w", method, err)
		}
		rd = bytes.NewReader(enc)
	}
	// A read answered 500 all_dbs_active (a server at max_dbs_open,
	// which some tests set low) is asked again: the oracle's reads must
	// not fail for the server's momentary state.
	wait, deadline := 20*time.Millisecond, time.Now().Add(time.Minute)
	for {
		status, err := c.do(ctx, method, path, rd, out)
		if method != http.MethodGet || status != 500 || !strings.Contains(fmt.Sprint(err), "all_dbs_active") || time.Now().After(deadline) {
			return status, err
		}
		select {
		case <-ctx.Done():
			return status, err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

func (c *Client) do(ctx context.Context, method, path string, rd io.Reader, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return 0, fmt.Errorf("couchtest: %s request: %w", method, err)
	}
	req.Header.Set("Accept", "application/json")
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.User != "" {
		req.SetBasicAuth(c.User, c.Password)
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		// url.Error carries the URL, which has no credentials here.
		return 0, fmt.Errorf("couchtest: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, fmt.Errorf("couchtest: read %s %s answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		if len(data) > 1024 {
			data = data[:1024]
		}
		return resp.StatusCode, &HTTPError{Method: method, Path: path, Status: resp.StatusCode, Body: string(bytes.TrimSpace(data))}
	}
	switch o := out.(type) {
	case nil:
	case *[]byte:
		*o = data
	default:
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("couchtest: decode %s %s answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// GetJSON decodes the answer of GET path into out (see Do for out).
func (c *Client) GetJSON(ctx context.Context, path string, out any) error {
	_, err := c.Do(ctx, http.MethodGet, path, nil, out)
	return err
}

// PutJSON sends in with PUT path and decodes the answer into out.
func (c *Client) PutJSON(ctx context.Context, path string, in, out any) error {
	_, err := c.Do(ctx, http.MethodPut, path, in, out)
	return err
}

// PostJSON sends in with POST path and decodes the answer into out.
func (c *Client) PostJSON(ctx context.Context, path string, in, out any) error {
	_, err := c.Do(ctx, http.MethodPost, path, in, out)
	return err
}

// CreateDB creates database db; an existing one is an error (412).
//
// CouchDB 3 may answer 412 file_exists to a PUT sent just after the
// database's DELETE was acknowledged (seen in CI on a loaded machine): the
// old shard files are still being removed, or the node's shard-map cache
// (mem3_shards) still holds the old database because its listener on
// `_dbs` lags or was restarted past the deletion, and GET /db may answer
// 404 or, for a moment, still find the old one. CreateDB asks again, for
// up to 60 s, while GET /db says the database is missing or while the
// database is one a couchtest client deleted in the last minute, so a test
// that recreates a database does not fail on that race; any other existing
// database still gives the 412 at once. After 5 s of such answers it
// clears the node's shard-map cache once (see clearShardCache).
func (c *Client) CreateDB(ctx context.Context, db string) error {
	path := "/" + EscapeDB(db)
	start := time.Now()
	deadline := start.Add(60 * time.Second)
	justDeleted := deletedRecently(c.BaseURL + path)
	cleared := false
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		st, err := c.Do(ctx, http.MethodPut, path, nil, nil)
		if st != http.StatusPreconditionFailed || time.Now().After(deadline) {
			return err
		}
		if gst, _ := c.Do(ctx, http.MethodGet, path, nil, nil); gst != http.StatusNotFound && !justDeleted {
			return err
		}
		if !cleared && time.Since(start) > 5*time.Second {
			cleared = true
			c.clearShardCache(ctx)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// clearShardCache makes a CouchDB node drop its shard-map cache: setting
// [mem3] shards_db, even to the value it has, restarts mem3_shards' `_dbs`
// listener with an empty cache (CouchDB 3.5, mem3_shards
// handle_config_change). A database deleted while that listener was down
// or behind is otherwise still found by the next PUT, which answers 412.
// The setting is not written to the server's ini
// (X-Couch-Persist: false). Errors are ignored: a server without the setting (PouchDB Server) has
// no such cache.
func (c *Client) clearShardCache(ctx context.Context) {
	const key = "/_node/_local/_config/mem3/shards_db"
	cur := "_dbs" // CouchDB's default, not listed by _config unless set
	if st, _ := c.Do(ctx, http.MethodGet, "/_up", nil, nil); st != http.StatusOK {
		return // not CouchDB 2+
	}
	if st, _ := c.Do(ctx, http.MethodGet, key, nil, &cur); st != http.StatusOK && st != http.StatusNotFound {
		return
	}
	body, _ := json.Marshal(cur)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.BaseURL+key, bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Couch-Persist", "false") // nothing written to the server's ini
	if c.User != "" {
		req.SetBasicAuth(c.User, c.Password)
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	if resp, err := hc.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// RecreateDB deletes database db (a missing one is no error) and creates
// it again, empty (see CreateDB for CouchDB's 412 after a DELETE).
func (c *Client) RecreateDB(ctx context.Context, db string) error {
	for attempt := 1; ; attempt++ {
		if err := c.DeleteDB(ctx, db); err != nil {
			return err
		}
		err := c.createOnce(ctx, db)
		// PouchDB Server opens a database again for a request still in
		// flight on it (a feed of a process killed a moment before),
		// which makes it exist again: it is deleted once more.
		if StatusOf(err) != http.StatusPreconditionFailed || attempt == 5 {
			return err
		}
	}
}

// createOnce is CreateDB with a short patience for 412: RecreateDB
// deletes the database again rather than wait for it to go.
func (c *Client) createOnce(ctx context.Context, db string) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := c.CreateDB(cctx, db)
	if err != nil && ctx.Err() == nil && cctx.Err() != nil && StatusOf(err) == 0 {
		return &HTTPError{Method: http.MethodPut, Path: "/" + EscapeDB(db), Status: http.StatusPreconditionFailed}
	}
	return err
}

// DeleteDB deletes database db; a missing one is not an error.
func (c *Client) DeleteDB(ctx context.Context, db string) error {
	path := "/" + EscapeDB(db)
	st, err := c.Do(ctx, http.MethodDelete, path, nil, nil)
	if err == nil {
		noteDeleted(c.BaseURL + path)
	}
	if st == http.StatusNotFound {
		return nil
	}
	return err
}

// deleted holds when each database URL was last deleted by a couchtest
// client, for CreateDB's retry after a recent DELETE.
var deleted struct {
	sync.Mutex
	at map[string]time.Time
}

func noteDeleted(url string) {
	deleted.Lock()
	defer deleted.Unlock()
	if deleted.at == nil {
		deleted.at = map[string]time.Time{}
	}
	deleted.at[url] = time.Now()
}

func deletedRecently(url string) bool {
	deleted.Lock()
	defer deleted.Unlock()
	at, ok := deleted.at[url]
	return ok && time.Since(at) < time.Minute
}

// PutDoc writes doc (any JSON-encodable value or raw JSON) as id in db with
// new_edits semantics and returns the new rev.
func (c *Client) PutDoc(ctx context.Context, db, id string, doc any) (string, error) {
	var res struct {
		Rev string `json:"rev"`
	}
	err := c.PutJSON(ctx, "/"+EscapeDB(db)+"/"+EscapeID(id), doc, &res)
	return res.Rev, err
}

// PutAttachment adds or replaces attachment name of doc id at rev (empty rev
// creates the doc) and returns the new rev.
func (c *Client) PutAttachment(ctx context.Context, db, id, rev, name, contentType string, data []byte) (string, error) {
	path := "/" + EscapeDB(db) + "/" + EscapeID(id) + "/" + url.PathEscape(name)
	if rev != "" {
		path += "?rev=" + url.QueryEscape(rev)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.BaseURL+path, bytes.NewReader(data))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", contentType)
	if c.User != "" {
		req.SetBasicAuth(c.User, c.Password)
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("couchtest: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return "", &HTTPError{Method: http.MethodPut, Path: path, Status: resp.StatusCode, Body: string(body)}
	}
	var res struct {
		Rev string `json:"rev"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return "", fmt.Errorf("couchtest: decode attachment answer: %w", err)
	}
	return res.Rev, nil
}

// BulkResult is one row of a _bulk_docs answer.
type BulkResult struct {
	ID     string `json:"id"`
	Rev    string `json:"rev,omitempty"`
	OK     bool   `json:"ok,omitempty"`
	Error  string `json:"error,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// BulkDocs posts docs (raw JSON objects) to db/_bulk_docs with the given
// new_edits. With newEdits false each doc needs _id, _rev and usually
// _revisions. It returns the per-document rows as answered (PouchDB Server
// answers [] for new_edits=false writes that all succeed); a row with Error
// set is reported as an error too.
func (c *Client) BulkDocs(ctx context.Context, db string, newEdits bool, docs ...json.RawMessage) ([]BulkResult, error) {
	if docs == nil {
		docs = []json.RawMessage{}
	}
	req := struct {
		Docs     []json.RawMessage `json:"docs"`
		NewEdits bool              `json:"new_edits"`
	}{docs, newEdits}
	var res []BulkResult
	if err := c.PostJSON(ctx, "/"+EscapeDB(db)+"/_bulk_docs", req, &res); err != nil {
		return nil, err
	}
	for _, r := range res {
		if r.Error != "" {
			return res, fmt.Errorf("couchtest: _bulk_docs %s: %s: %s", r.ID, r.Error, r.Reason)
		}
	}
	return res, nil
}

// Group is the names and roles of one _security section.
type Group struct {
	Names []string `json:"names"`
	Roles []string `json:"roles"`
}

// MarshalJSON writes nil lists as [] (CouchDB refuses null names or roles,
// with a 500 no_majority).
func (g Group) MarshalJSON() ([]byte, error) {
	names, roles := g.Names, g.Roles
	if names == nil {
		names = []string{}
	}
	if roles == nil {
		roles = []string{}
	}
	return json.Marshal(struct {
		Names []string `json:"names"`
		Roles []string `json:"roles"`
	}{names, roles})
}

// Security is a database's _security object.
type Security struct {
	Admins  Group `json:"admins"`
	Members Group `json:"members"`
}

// PutSecurity writes db/_security; sec may be a Security or any JSON value.
func (c *Client) PutSecurity(ctx context.Context, db string, sec any) error {
	return c.PutJSON(ctx, "/"+EscapeDB(db)+"/_security", sec, nil)
}

// CreateUser creates a non-admin user in _users (needs the admin client when
// the server has an admin).
func (c *Client) CreateUser(ctx context.Context, name, password string, roles ...string) error {
	if roles == nil {
		roles = []string{}
	}
	id := "org.couchdb.user:" + name
	doc := map[string]any{"_id": id, "name": name, "password": password, "roles": roles, "type": "user"}
	if _, err := c.PutDoc(ctx, "_users", id, doc); err != nil {
		return fmt.Errorf("couchtest: create user %q: %w", name, err)
	}
	return nil
}

// ReadOnlyDesignID is the design document that MakeReadOnly installs.
const ReadOnlyDesignID = "_design/couchtest_readonly"

// MakeReadOnly restricts db to the given member names and installs a
// validate_doc_update function that rejects document writes by anyone but
// server admins (403 forbidden, per document in _bulk_docs). Members can
// still read everything and write _local documents; see the package doc.
// Must be called with admin credentials.
func (c *Client) MakeReadOnly(ctx context.Context, db string, members ...string) error {
	if members == nil {
		members = []string{}
	}
	vdu := `function (newDoc, oldDoc, userCtx) {
  if (userCtx.roles.indexOf('_admin') === -1) { throw({forbidden: 'read-only database'}); }
}`
	if _, err := c.PutDoc(ctx, db, ReadOnlyDesignID, map[string]any{"validate_doc_update": vdu}); err != nil {
		return err
	}
	sec := Security{Admins: Group{Names: []string{}, Roles: []string{}}, Members: Group{Names: members, Roles: []string{}}}
	return c.PutSecurity(ctx, db, sec)
}

// ChangeUserPassword gives the `_users` account user the password
// newPw, then waits until the server refuses oldPw for a read of db (its
// cache of users follows `_users` on its own time), polling until ctx
// ends.
func (c *Client) ChangeUserPassword(ctx context.Context, user, oldPw, newPw, db string) error {
	id := "/_users/org.couchdb.user:" + url.PathEscape(user)
	var doc map[string]any
	if err := c.GetJSON(ctx, id, &doc); err != nil {
		return err
	}
	doc["password"] = newPw
	if err := c.PutJSON(ctx, id, doc, nil); err != nil {
		return err
	}
	old := &Client{BaseURL: c.BaseURL, User: user, Password: oldPw, HTTP: c.HTTP}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var info map[string]any
		if err := old.GetJSON(ctx, "/"+EscapeDB(db), &info); err != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the old password of %s is still accepted: %w", user, ctx.Err())
		case <-tick.C:
		}
	}
}
