package couch

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
)

// AuthMode says how a client sends the credentials of its URL.
type AuthMode string

const (
	// AuthBasic sends them with every request (HTTP basic authentication).
	AuthBasic AuthMode = "basic"
	// AuthCookie sends them once to `POST /_session` and then the
	// AuthSession cookie the server returns: the password crosses the
	// network once, and the server checks it once (a CouchDB password
	// hash costs the server about the same CPU at every basic request).
	AuthCookie AuthMode = "cookie"
)

// sessionCookie is the name of CouchDB's session cookie.
const sessionCookie = "AuthSession"

// session is the cookie login state of a client in AuthCookie mode.
type session struct {
	mu     sync.Mutex
	cookie string // "AuthSession=..." once logged in
	basic  bool   // the server has no _session: basic authentication instead
}

// AuthUsed is the authentication the client sends: its Options.Auth, or
// AuthBasic when AuthCookie was asked and the server turned out to have
// no `_session` endpoint (known after the first request).
func (c *Client) AuthUsed() AuthMode {
	if c.opts.Auth != AuthCookie {
		return c.opts.Auth
	}
	c.sess.mu.Lock()
	defer c.sess.mu.Unlock()
	if c.sess.basic {
		return AuthBasic
	}
	return AuthCookie
}

// cookieAuth reports whether requests carry the session cookie (or are
// about to: the login has not happened yet).
func (c *Client) cookieAuth() bool {
	return c.opts.Auth == AuthCookie && c.sendsCredentials()
}

// sendsCredentials: the URL gave credentials to send. A user name without
// a password is not sent (requests go without credentials): the server
// would count the missing password as a failed login (CouchDB locks an
// account out after a few), and a 401 then says the password is missing.
func (c *Client) sendsCredentials() bool {
	return (c.user != "" || c.pass != "") && !c.noPass
}

// authHeader sets the request's credentials: the session cookie (the
// value returned is the one sent, for relogin), or basic authentication.
func (c *Client) authHeader(req *http.Request) string {
	if c.cookieAuth() {
		c.sess.mu.Lock()
		cookie, basic := c.sess.cookie, c.sess.basic
		c.sess.mu.Unlock()
		if !basic {
			if cookie != "" {
				req.Header.Set("Cookie", cookie)
			}
			return cookie
		}
	}
	if c.sendsCredentials() {
		req.SetBasicAuth(c.user, c.pass)
	}
	return ""
}

// ensureSession logs in once, before the first request in cookie mode.
func (c *Client) ensureSession(ctx context.Context) error {
	if !c.cookieAuth() {
		return nil
	}
	c.sess.mu.Lock()
	defer c.sess.mu.Unlock()
	if c.sess.cookie != "" || c.sess.basic {
		return nil
	}
	return c.loginLocked(ctx)
}

// relogin logs in again after a 401 answered a request that carried the
// cookie sent; a login by another request since then is reused.
func (c *Client) relogin(ctx context.Context, sent string) error {
	c.sess.mu.Lock()
	defer c.sess.mu.Unlock()
	if c.sess.cookie != sent || c.sess.basic {
		return nil
	}
	return c.loginLocked(ctx)
}

// loginLocked posts the credentials to `_session` and keeps the cookie.
// A server that answers 404 or 405 (no such endpoint) gets basic
// authentication from then on. Called with c.sess.mu held.
func (c *Client) loginLocked(ctx context.Context) error {
	body, err := json.Marshal(map[string]string{"name": c.user, "password": c.pass})
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, &request{Method: "POST", Path: "/_session", Body: body, ContentType: "application/json", login: true})
	if err != nil {
		if st := StatusOf(err); st == 404 || st == 405 {
			c.sess.basic = true
			if c.opts.Log != nil {
				c.opts.Log("%s has no _session endpoint: using basic authentication", c.URL())
			}
			return nil
		}
		return err
	}
	defer resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == sessionCookie && ck.Value != "" {
			c.sess.cookie = sessionCookie + "=" + ck.Value
			return nil
		}
	}
	c.sess.basic = true
	if c.opts.Log != nil {
		c.opts.Log("%s answered POST /_session without a session cookie: using basic authentication", c.URL())
	}
	return nil
}

// keepCookie takes a refreshed session cookie from an answer (CouchDB
// sends one once part of the session's lifetime has passed).
func (c *Client) keepCookie(resp *http.Response) {
	if !c.cookieAuth() {
		return
	}
	for _, v := range resp.Header.Values("Set-Cookie") {
		ck, err := http.ParseSetCookie(v)
		if err != nil || ck.Name != sessionCookie || ck.Value == "" {
			continue
		}
		c.sess.mu.Lock()
		if !c.sess.basic {
			c.sess.cookie = sessionCookie + "=" + ck.Value
		}
		c.sess.mu.Unlock()
	}
}
