// Package couch is sofa's CouchDB HTTP client: the replication protocol
// subset (changes, revs_diff, bulk_get, bulk_docs with new_edits=false,
// _local checkpoints, _security, _revs_limit, _all_dbs) over net/http, with
// per-request retries, Retry-After and an optional per-host pacer. A DB
// implements replicate.Source and replicate.Target.
package couch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Defaults for Options; each option's zero value selects these.
const (
	DefaultAttemptTimeout = 90 * time.Second
	DefaultRetryTime      = 2 * time.Minute
	DefaultMax429Wait     = 10 * time.Minute
	DefaultMaxConns       = 32
)

// Options tunes a Client. Zero values select the documented defaults.
type Options struct {
	// AttemptTimeout bounds one HTTP attempt (headers and body) of an
	// ordinary request; a streamed `_changes` read is bounded per read
	// instead. Zero: DefaultAttemptTimeout (90 s).
	AttemptTimeout time.Duration
	// RetryTime bounds the total time one request spends retrying network
	// errors, timeouts, 408 and 5xx (exponential backoff, full jitter).
	// Zero: DefaultRetryTime (2 min). Negative: no retries.
	RetryTime time.Duration
	// OutageClock: RetryTime counts from the start of the server's
	// current outage (the first attempt of any request that got no
	// answer), not from each request's own start, so a server found lost
	// is not waited for RetryTime again by every request that follows
	// (a one-shot run's checkpoints after its writes gave up): once the
	// server has not answered for RetryTime, a request gives up at its
	// first attempt that gets no answer, until one gets an answer.
	// False (continuous runs, which outlive outages): each request has
	// its own RetryTime.
	OutageClock bool
	// Max429Wait bounds the total time one request waits on 429/503 (and all_dbs_active) answers
	// (honouring Retry-After); these waits do not use up RetryTime. Zero:
	// DefaultMax429Wait (10 min).
	Max429Wait time.Duration
	// ChangesPage is the number of `_changes` rows asked per request
	// (DBOptions.ChangesPage overrides it). Zero: the server's Caps.ChangesPage
	// (DefaultChangesPage, 10,000 on Apache CouchDB); negative:
	// one unpaged request.
	ChangesPage int
	// MaxConns caps TCP connections per host. Zero: DefaultMaxConns (32).
	MaxConns int
	// Pacer, if set, is asked before every attempt and told its outcome
	// (the fleet's adaptive concurrency controller). Nil: no pacing.
	Pacer Pacer
	// Log, if set, receives one line per retry or wait (credentials never
	// included).
	Log func(format string, args ...any)
	// Transport overrides the HTTP transport (tests). The TLS options
	// below then do not apply (setting them with it is an error).
	Transport http.RoundTripper

	// Auth says how the URL's credentials are sent: AuthBasic (the zero
	// value) with every request, or AuthCookie: once to `POST /_session`,
	// then the AuthSession cookie it returns (logged in again once when a
	// request is refused with 401; a server without `_session` gets basic
	// authentication instead, see Client.AuthUsed).
	Auth AuthMode
	// PasswordHint tells how to give the password a URL naming a user
	// without one lacks (for example "set SOFA_SOURCE_PASSWORD"); it ends
	// the error of a request such a URL had refused with 401. Empty: "put
	// it in the URL".
	PasswordHint string
	// CACertFile names a PEM file of CA certificates trusted for https
	// servers instead of the system's.
	CACertFile string
	// ClientCertFile and ClientKeyFile name the PEM client certificate and
	// its key, sent to https servers that ask for one; both or neither.
	ClientCertFile string
	ClientKeyFile  string
	// InsecureSkipVerify accepts any server certificate for any name:
	// whoever sits on the network path can read and change the data and
	// the credentials. For tests and emergencies only.
	InsecureSkipVerify bool
}

// tlsSet reports whether any TLS option is set.
func (o *Options) tlsSet() bool {
	return o.CACertFile != "" || o.ClientCertFile != "" || o.ClientKeyFile != "" || o.InsecureSkipVerify
}

// Pacer gates requests to one host. Acquire blocks until a request may
// start and returns the function to call with its outcome.
type Pacer interface {
	Acquire(ctx context.Context) (done func(Outcome), err error)
}

// Outcome is what a Pacer learns about one attempt.
type Outcome struct {
	Latency  time.Duration // time to response headers (or failure)
	Status   int           // HTTP status; 0 for a network error or timeout
	Overload bool          // 429, 503, timeout or all_dbs_active
	Err      error         // network error, if any
	// RetryAfter is the server's Retry-After delay on this answer, if any.
	RetryAfter time.Duration
}

// Counters are cumulative request statistics of a Client, safe to read
// concurrently.
type Counters struct {
	Requests  atomic.Int64 // attempts sent
	Retries   atomic.Int64 // attempts repeated after a retryable failure
	Throttled atomic.Int64 // 429/503 and all_dbs_active answers
	WaitNanos atomic.Int64 // time spent waiting before retries
	Backoff   atomic.Int64 // requests waiting before a retry right now
	BytesIn   atomic.Int64 // response body bytes read through this client
	BytesOut  atomic.Int64 // request body bytes sent
	kinds     kindCounts   // attempts by kind; see Kinds
}

// Client talks to one CouchDB server (scheme, host, port, path prefix).
type Client struct {
	base  *url.URL // without userinfo, path without trailing slash
	user  string
	pass  string
	hc    *http.Client
	opts  Options
	sess  session // cookie login state (Options.Auth == AuthCookie)
	reach reach   // whether the server answers (WatchReach)
	Stats *Counters

	noPass bool // the URL names a user and no password
}

// NewClient parses a server or database URL (`http(s)://user:pass@host:port/prefix`)
// and returns a client for its server. Credentials come from the URL
// userinfo; SOFA_USER/SOFA_PASSWORD style fallbacks are resolved by the
// caller. The database path, if any, is returned as the decoded db name.
func NewClient(rawURL string, opts Options) (*Client, error) {
	u, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("invalid URL %q: scheme must be http or https", RedactURL(rawURL))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("invalid URL %q: no host", RedactURL(rawURL))
	}
	c := &Client{opts: opts, Stats: &Counters{}}
	if u.User != nil {
		var hasPass bool
		c.user = u.User.Username()
		c.pass, hasPass = u.User.Password()
		c.noPass = c.user != "" && !hasPass
	}
	b := *u
	b.User = nil
	b.RawQuery, b.Fragment = "", ""
	b.Path = strings.TrimRight(b.Path, "/")
	b.RawPath = strings.TrimRight(b.RawPath, "/")
	c.base = &b
	if c.opts.AttemptTimeout == 0 {
		c.opts.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.opts.RetryTime == 0 {
		c.opts.RetryTime = DefaultRetryTime
	}
	if c.opts.Max429Wait == 0 {
		c.opts.Max429Wait = DefaultMax429Wait
	}
	if c.opts.MaxConns == 0 {
		c.opts.MaxConns = DefaultMaxConns
	}
	if c.opts.Auth == "" {
		c.opts.Auth = AuthBasic
	}
	if c.opts.Auth != AuthBasic && c.opts.Auth != AuthCookie {
		return nil, fmt.Errorf("unknown authentication mode %q (want basic or cookie)", string(c.opts.Auth))
	}
	rt := opts.Transport
	if rt == nil {
		t, err := newTransport(&c.opts, u.Hostname())
		if err != nil {
			return nil, err
		}
		rt = t
	} else if opts.tlsSet() {
		return nil, errors.New("the TLS options do not apply to a caller's own Transport")
	}
	c.hc = &http.Client{Transport: rt, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		return nil
	}}
	return c, nil
}

// URL is the server URL without credentials.
func (c *Client) URL() string { return c.base.String() }

// CloseIdleConnections closes the client's keep-alive connections that
// carry no request now (a program done with a server; the transport
// closes them itself after 90 s idle). Requests made later open new ones.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Check refuses option values no client can use: a negative
// AttemptTimeout, Max429Wait or MaxConns (a negative AttemptTimeout
// timed every attempt out at once), and an Auth other than AuthBasic,
// AuthCookie or "". RetryTime and ChangesPage give negative values a
// meaning.
func (o *Options) Check() error {
	switch {
	case o.AttemptTimeout < 0:
		return fmt.Errorf("attempt timeout %v: want 0 (the default, %v) or more", o.AttemptTimeout, DefaultAttemptTimeout)
	case o.Max429Wait < 0:
		return fmt.Errorf("429 wait %v: want 0 (the default, %v) or more", o.Max429Wait, DefaultMax429Wait)
	case o.MaxConns < 0:
		return fmt.Errorf("connections per host %d: want 0 (the default, %d) or more", o.MaxConns, DefaultMaxConns)
	case o.Auth != "" && o.Auth != AuthBasic && o.Auth != AuthCookie:
		return fmt.Errorf("authentication mode %q: want %q or %q", o.Auth, AuthBasic, AuthCookie)
	}
	return nil
}
