package couch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sofadb/sofa/replicate"
)

// Error is an HTTP error answer from CouchDB: the status and the
// `{"error","reason"}` body.
type Error struct {
	Method     string
	Path       string // escaped request path (no credentials)
	Status     int
	Name       string // CouchDB "error", e.g. "not_found", "forbidden"
	Reason     string // CouchDB "reason"
	RetryAfter string // Retry-After header, if any
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s %s: HTTP %d", e.Method, e.Path, e.Status)
	if e.Name != "" {
		msg += " " + e.Name
	}
	if e.Reason != "" && e.Reason != e.Name {
		msg += ": " + e.Reason
	}
	if e.Status == http.StatusProxyAuthRequired {
		msg += proxyAuthHint
	}
	return msg
}

// StatusOf returns the HTTP status carried by err, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// NetError is a failure below HTTP: connection refused or reset, DNS,
// timeout, TLS. The URL is never included (it may carry credentials).
type NetError struct {
	Op  string
	Err error
}

func (e *NetError) Error() string {
	msg := e.Op + ": " + e.Err.Error()
	if strings.Contains(msg, "Proxy Authentication Required") {
		msg += proxyAuthHint
	}
	return msg
}

// proxyAuthHint follows an HTTP proxy's 407 answer (to a request, or to
// the CONNECT of an https one).
const proxyAuthHint = " (the HTTP proxy wants credentials: give them in HTTP_PROXY or HTTPS_PROXY, http://USER:PASSWORD@PROXY:PORT)"

func (e *NetError) Unwrap() error { return e.Err }

func readError(r *request, resp *http.Response) *Error {
	defer resp.Body.Close()
	e := &Error{Method: r.Method, Path: trimPath(r.Path), Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Error  any `json:"error"`
		Reason any `json:"reason"`
	}
	var rows []struct {
		Error  any `json:"error"`
		Reason any `json:"reason"`
	}
	if json.Unmarshal(b, &body) == nil {
		e.Name, e.Reason = fmt.Sprint(orEmpty(body.Error)), fmt.Sprint(orEmpty(body.Reason))
	} else if json.Unmarshal(b, &rows) == nil && len(rows) > 0 {
		// _bulk_docs refused as a whole: a 500 with one error row per
		// document ([{"error":"error","reason":"internal_server_error"}]).
		e.Name, e.Reason = fmt.Sprint(orEmpty(rows[0].Error)), fmt.Sprint(orEmpty(rows[0].Reason))
	} else if len(b) > 0 {
		e.Reason = "non-JSON answer (" + strings.TrimSpace(resp.Header.Get("Content-Type")) + ")"
	}
	return e
}

func orEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}

func trimPath(p string) string {
	if len(p) > 200 {
		return p[:200] + "..."
	}
	return p
}

// stripURLError removes the URL (which may carry credentials) from a
// *url.Error, keeping the cause.
func stripURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func asError(err error, target **Error) bool { return errors.As(err, target) }

// DocRefusal reports a 400 that refuses a request for what one of its
// documents is, not for the request's form: CouchDB names it
// (illegal_docid: an id without a partition in a partitioned database,
// or one starting with an underscore; doc_validation: a bad special
// member), where a malformed request is a bad_request. One such document
// makes CouchDB refuse a whole `_revs_diff` or `_bulk_docs`; the engine
// (replicate.DocRefusal) splits the request to find it and reports it
// with name and reason.
func (e *Error) DocRefusal() (name, reason string, ok bool) {
	if e.Status != 400 || e.Name == "" || e.Name == "bad_request" {
		return "", "", false
	}
	if e.Reason == "" {
		return e.Name, e.Name, true
	}
	return e.Name, e.Reason, true
}

// AllDBsActive reports a CouchDB that could not open the database because
// max_dbs_open databases are in use: a 500 that means "fewer at once",
// retried like a 429 and taken by the limiter as overload. CouchDB 3.5
// words it in several ways depending on the request, all seen on a server
// with max_dbs_open lowered: {"error":"error","reason":"all_dbs_active"}
// (GET _changes), {"error":"invalid_stream_start","reason":
// "{error,all_dbs_active}"} (_all_docs), {"error":
// "internal_server_error","reason":"No DB shards could be opened."} when
// every shard of the database failed to open (_bulk_docs, _local,
// _changes), and {"error":"error","reason":"internal_server_error"} (PUT
// _local, and per document in a _bulk_docs answer) when no shard copy
// answered a write (fabric's words for a worker that failed: all_dbs_active
// or a worker gone, transient either way).
func (e *Error) AllDBsActive() bool {
	return e.Status == 500 && (strings.Contains(e.Name, "all_dbs_active") || strings.Contains(e.Reason, "all_dbs_active") ||
		strings.Contains(e.Reason, "No DB shards could be opened") ||
		e.Name == "error" && e.Reason == "internal_server_error")
}

// dbsActiveBody: a 500 answer's body says what Error.AllDBsActive
// recognises.
func dbsActiveBody(b []byte) bool {
	return bytes.Contains(b, []byte("all_dbs_active")) || bytes.Contains(b, []byte("No DB shards could be opened")) ||
		bytes.Contains(b, []byte(`{"error":"error","reason":"internal_server_error"}`))
}

// denied reports a refusal for lack of rights: 401, 403, or a 500 whose
// error or reason says forbidden/unauthorized (CouchDB 3 answers a member's
// `PUT /db/_revs_limit` with 500 badmatch {error,{forbidden,...}}).
func (e *Error) denied() bool {
	if e.Status == 401 || e.Status == 403 {
		return true
	}
	s := strings.ToLower(e.Name + " " + e.Reason)
	return strings.Contains(s, "forbidden") || strings.Contains(s, "unauthorized")
}

// Is makes an HTTP 401 or 403 answer (a refusal of the whole request
// for lack of rights) match replicate.ErrDenied.
func (e *Error) Is(target error) bool {
	return target == replicate.ErrDenied && (e.Status == 401 || e.Status == 403)
}

// Denied reports whether err is a refusal for lack of rights (see
// Error.denied).
func Denied(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.denied()
}

// An authError is a 401 answer worded for an operator (unauthorized):
// its message is the wording alone (the request's error is not
// repeated), and it wraps that error, so that StatusOf and errors.As
// find the *Error.
type authError struct {
	msg string
	err error
}

func (e *authError) Error() string { return e.msg }
func (e *authError) Unwrap() error { return e.err }

// authErr is err, a 401 answer, worded by unauthorized and wrapped.
func (c *Client) authErr(err error) error { return &authError{msg: c.unauthorized(err), err: err} }

// unauthorized words a 401 answer for an operator. It tells apart a URL
// naming a user but no password, no credentials at all, credentials the
// server called wrong, and a refusal of credentials it accepted (CouchDB
// answers a valid user who is not a server admin with 401 "You are not a
// server admin."), whose reason it passes on.
func (c *Client) unauthorized(err error) string {
	var e *Error
	errors.As(err, &e)
	switch {
	case c.noPass:
		hint := c.opts.PasswordHint
		if hint == "" {
			hint = "put it in the URL"
		}
		return fmt.Sprintf("authentication failed (HTTP 401): no password given for user %q; %s", c.user, hint)
	case c.user == "" && c.pass == "":
		return "authentication required (HTTP 401): give a user name and password"
	case e != nil && e.Reason != "" && !badCredentials(e.Reason):
		name := e.Name
		if name == "" {
			name = "unauthorized"
		}
		return fmt.Sprintf("refused (HTTP 401 %s): %s", name, e.Reason)
	}
	return "authentication failed (HTTP 401): check the user name and password"
}

// badCredentials: a 401 reason saying the name or password is wrong
// (CouchDB and PouchDB Server: "Name or password is incorrect.").
func badCredentials(reason string) bool {
	r := strings.ToLower(reason)
	return strings.Contains(r, "password") || strings.Contains(r, "incorrect") || strings.Contains(r, "credentials")
}
