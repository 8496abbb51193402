// Package couch is sofa's CouchDB HTTP client: the replication protocol
// subset (changes, revs_diff, bulk_get, bulk_docs with new_edits=false,
// _local checkpoints, _security, _revs_limit, _all_dbs) over net/http, with
// per-request retries, Retry-After and an optional per-host pacer. A DB
// implements replicate.Source and replicate.Target.
package couch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
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
	// Max429Wait bounds the total time one request waits on 429/503 (and all_dbs_active) answers
	// (honouring Retry-After); these waits do not use up RetryTime. Zero:
	// DefaultMax429Wait (10 min).
	Max429Wait time.Duration
	// ChangesPage is the number of `_changes` rows asked per request
	// (DB.ChangesPage overrides it). Zero: the server's Caps.ChangesPage
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
	Stats *Counters

	noPass bool // the URL names a user and no password
}

// NewClient parses a server or database URL (`http(s)://user:pass@host:port/prefix`)
// and returns a client for its server. Credentials come from the URL
// userinfo; SOFA_USER/SOFA_PASSWORD style fallbacks are resolved by the
// caller. The database path, if any, is returned as the decoded db name.
func NewClient(rawURL string, opts Options) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("invalid URL %q: %w", RedactURL(rawURL), redactErr(err))
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

// request describes one HTTP request; Body is kept so it can be resent.
type request struct {
	Method      string
	Path        string // escaped path below the base, starting with "/"
	Query       string // raw query without "?"
	Body        []byte
	ContentType string
	Accept      string
	Header      http.Header
	// Stream: the caller reads the body itself and the attempt timeout does
	// not apply to reading it (changes feed).
	Stream bool
	// BodyFn, when set instead of Body, opens a fresh request body of
	// BodyLen bytes for every attempt (streamed uploads).
	BodyFn  func() (io.ReadCloser, error)
	BodyLen int64
	// NoRetry: fail on the first error.
	NoRetry bool
	// RetryTime overrides Options.RetryTime for this request when > 0
	// (probing fails faster).
	RetryTime time.Duration
	// login: the `POST /_session` of cookie authentication (sent without
	// credentials in headers, never logged in for).
	login bool
	// sentCookie is the session cookie the last attempt carried.
	sentCookie string
}

func (c *Client) newHTTPRequest(ctx context.Context, r *request) (*http.Request, error) {
	u := *c.base
	u.Path = "" // set raw below
	raw := c.base.EscapedPath() + r.Path
	full := u.Scheme + "://" + u.Host + raw
	if r.Query != "" {
		full += "?" + r.Query
	}
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, full, body)
	if err != nil {
		return nil, err
	}
	if r.BodyFn != nil {
		rc, err := r.BodyFn()
		if err != nil {
			return nil, err
		}
		req.Body, req.ContentLength, req.GetBody = rc, r.BodyLen, r.BodyFn
	}
	if r.Body != nil {
		req.ContentLength = int64(len(r.Body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(r.Body)), nil }
	}
	for k, v := range r.Header {
		req.Header[k] = v
	}
	if r.ContentType != "" {
		req.Header.Set("Content-Type", r.ContentType)
	}
	if r.Accept != "" {
		req.Header.Set("Accept", r.Accept)
	} else {
		req.Header.Set("Accept", "application/json")
	}
	req.Header.Set("User-Agent", "sofa/0.1")
	if !r.login {
		r.sentCookie = c.authHeader(req)
	}
	return req, nil
}

// do runs a request with retries and returns a response with status < 300
// (the caller closes its body), or an error: *Error for HTTP statuses,
// otherwise a network error (credentials removed).
func (c *Client) do(ctx context.Context, r *request) (*http.Response, error) {
	if !r.login {
		if err := c.ensureSession(ctx); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	var waited429 time.Duration
	attempt := 0
	relogged := false
	for {
		attempt++
		resp, cancel, err := c.attempt(ctx, r)
		if err == nil && resp.StatusCode < 300 {
			if r.Stream {
				return wrapCancel(resp, cancel), nil
			}
			// Read the whole answer inside the attempt, so that a
			// connection reset or timeout in the middle of the body is
			// retried like one before the headers.
			if err = bufferBody(resp); err == nil {
				cancel()
				return resp, nil
			}
			err = &NetError{Op: r.Method + " " + c.redactedPath(r.Path), Err: err}
		}
		var herr *Error
		if err == nil {
			herr = readError(r, resp)
			cancel()
			err = herr
		} else {
			cancel()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if herr != nil && herr.Status == 401 && r.sentCookie != "" && !relogged {
			// The session expired or the server forgot it (restart,
			// another secret): log in once more and repeat the request.
			relogged = true
			if lerr := c.relogin(ctx, r.sentCookie); lerr != nil {
				return nil, lerr
			}
			continue
		}
		if r.NoRetry || !retryable(err) {
			return nil, err
		}
		var wait time.Duration
		if herr != nil && (herr.Status == 429 || herr.Status == 503 || herr.AllDBsActive()) {
			c.Stats.Throttled.Add(1)
			wait = backoff(attempt, 250*time.Millisecond, 30*time.Second)
			if ra, ok := retryAfter(herr.RetryAfter, time.Now()); ok {
				wait = ra + time.Duration(rand.Int64N(int64(100*time.Millisecond)))
			}
			if waited429+wait > c.opts.Max429Wait {
				return nil, fmt.Errorf("%w (gave up after waiting %s on rate limits)", err, waited429.Round(time.Second))
			}
			waited429 += wait
		} else {
			budget := c.opts.RetryTime
			if r.RetryTime > 0 {
				budget = r.RetryTime
			}
			if budget < 0 {
				return nil, err
			}
			wait = backoff(attempt, 250*time.Millisecond, 20*time.Second)
			if time.Since(start)-waited429+wait > budget {
				return nil, fmt.Errorf("%w (gave up after %d attempts in %s)", err, attempt, time.Since(start).Round(time.Second))
			}
		}
		c.Stats.Retries.Add(1)
		c.Stats.WaitNanos.Add(int64(wait))
		if c.opts.Log != nil {
			c.opts.Log("retry %s %s in %s: %v", r.Method, c.redactedPath(r.Path), wait.Round(time.Millisecond), err)
		}
		c.Stats.Backoff.Add(1)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			c.Stats.Backoff.Add(-1)
			return nil, ctx.Err()
		case <-t.C:
		}
		c.Stats.Backoff.Add(-1)
	}
}

// busyWait is the throttle wait for an overload a server reported inside
// a successful answer (CouchDB's per-revision all_dbs_active): counted as
// throttled, told to the pacer as an overload, then a backoff wait as for
// a 429, within Options.Max429Wait (*waited sums this caller's waits).
func (c *Client) busyWait(ctx context.Context, attempt int, waited *time.Duration) error {
	c.Stats.Throttled.Add(1)
	if c.opts.Pacer != nil {
		done, err := c.opts.Pacer.Acquire(ctx)
		if err != nil {
			return err
		}
		done(Outcome{Status: 500, Overload: true})
	}
	wait := backoff(attempt, 250*time.Millisecond, 30*time.Second)
	if *waited+wait > c.opts.Max429Wait {
		return fmt.Errorf("gave up after waiting %s on all_dbs_active", waited.Round(time.Second))
	}
	*waited += wait
	c.Stats.Retries.Add(1)
	c.Stats.WaitNanos.Add(int64(wait))
	c.Stats.Backoff.Add(1)
	defer c.Stats.Backoff.Add(-1)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// attempt sends one HTTP attempt. On success the returned cancel must be
// called once the body is consumed.
func (c *Client) attempt(ctx context.Context, r *request) (*http.Response, context.CancelFunc, error) {
	var done func(Outcome)
	if c.opts.Pacer != nil {
		d, err := c.opts.Pacer.Acquire(ctx)
		if err != nil {
			return nil, func() {}, err
		}
		done = d
	}
	actx, cancel := context.WithCancel(ctx)
	// The timer bounds the attempt up to the end of its body; a stream
	// must produce headers within it, then each read re-arms it.
	limit := c.opts.AttemptTimeout
	if r.BodyLen > 0 {
		limit += time.Duration(r.BodyLen>>20) * time.Second // an upload gets 1 s per MiB more
	}
	timer := time.AfterFunc(limit, cancel)
	req, err := c.newHTTPRequest(actx, r)
	if err != nil {
		timer.Stop()
		cancel()
		if done != nil {
			done(Outcome{Err: err})
		}
		return nil, func() {}, err
	}
	c.Stats.Requests.Add(1)
	c.Stats.kinds.add(r.Method, r.Path)
	c.Stats.BytesOut.Add(int64(len(r.Body)))
	t0 := time.Now()
	resp, err := c.hc.Do(req)
	lat := time.Since(t0)
	if err != nil {
		timedOut := actx.Err() != nil && ctx.Err() == nil
		timer.Stop()
		cancel()
		if done != nil {
			done(Outcome{Latency: lat, Overload: timedOut || isTimeout(err), Err: err})
		}
		if timedOut {
			return nil, func() {}, &NetError{Op: r.Method + " " + c.redactedPath(r.Path), Err: errAttemptTimeout}
		}
		return nil, func() {}, &NetError{Op: r.Method + " " + c.redactedPath(r.Path), Err: stripURLError(err)}
	}
	overload := resp.StatusCode == 429 || resp.StatusCode == 503
	if resp.StatusCode == 500 {
		// CouchDB at max_dbs_open answers 500: the error body says so.
		// Read it here (it is small) so that the pacer learns of the
		// overload; readError reads it again.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body = &struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), resp.Body), resp.Body}
		overload = dbsActiveBody(b)
	}
	o := Outcome{Latency: lat, Status: resp.StatusCode, Overload: overload}
	if o.Overload {
		o.RetryAfter, _ = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	// The pacer's slot is held until the answer is read (stop): the
	// server is busy until it has sent it (CouchDB sends the headers of
	// _bulk_get and _all_docs first and builds the body after), so the
	// requests counted in flight are those the server is serving. A stream
	// (a changes feed, which may last) gives its slot back at the headers.
	// The latency is the time to the headers either way.
	if done != nil && r.Stream {
		done(o)
	}
	if !r.login {
		c.keepCookie(resp)
	}
	stop := func() {
		timer.Stop()
		cancel()
		if done != nil && !r.Stream {
			done(o)
		}
	}
	resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.Stats.BytesIn}
	if r.Stream {
		// A stream is bounded per read: the attempt is cancelled when no
		// byte arrives for AttemptTimeout.
		timer.Reset(c.opts.AttemptTimeout)
		resp.Body = &idleBody{ReadCloser: resp.Body, t: timer, d: c.opts.AttemptTimeout}
	}
	return resp, stop, nil
}

// idleBody re-arms the attempt timer after every read of a streamed body.
type idleBody struct {
	io.ReadCloser
	t *time.Timer
	d time.Duration
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == nil {
		b.t.Reset(b.d)
	}
	return n, err
}

var errAttemptTimeout = errors.New("request timed out")

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

func wrapCancel(resp *http.Response, cancel context.CancelFunc) *http.Response {
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp
}

func (c *Client) redactedPath(p string) string {
	if len(p) > 200 {
		return p[:200] + "..."
	}
	return p
}

// backoff is full-jitter exponential backoff: a random wait in
// [0, min(max, base*2^(attempt-1))].
func backoff(attempt int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return time.Duration(rand.Int64N(int64(d))) + base/4
}

// retryAfter parses a Retry-After value (seconds or HTTP date).
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d, true
		}
		return 0, true
	}
	return 0, false
}

func retryable(err error) bool {
	var herr *Error
	if errors.As(err, &herr) {
		switch {
		case herr.Status >= 500 && herr.denied():
			return false // a refusal CouchDB wraps in a 500: permanent
		case herr.Status == 408, herr.Status == 429, herr.Status >= 500:
			return true
		}
		return false
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return false // an unknown host does not come back by retrying
	}
	if permanentTLS(err) {
		return false // an untrusted certificate stays untrusted
	}
	var nerr *NetError
	return errors.As(err, &nerr)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
