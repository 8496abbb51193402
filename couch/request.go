package couch

// One request to the server: its attempts, retries, backoff and the
// bodies that count, buffer and cancel what comes back.

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

	ctxwait "github.com/sofadb/sofa/internal/wait"
	"github.com/sofadb/sofa/replicate"
)

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
	// AttemptTimeout, when > 0, lowers Options.AttemptTimeout for this
	// request (the welcome: a server answers it at once or not at all).
	AttemptTimeout time.Duration
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
	// the host as a URL spells it: an IPv6 zone's "%" as "%25"
	full := (&url.URL{Scheme: u.Scheme, Host: u.Host}).String() + raw
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
				return nil, fmt.Errorf("%w (gave up after waiting %s on rate limits or overload: 429, 503 and CouchDB's overload 500s count against the 429 wait, not the retry time)", err, waited429.Round(time.Second))
			}
			waited429 += wait
		} else {
			budget := c.opts.RetryTime
			if r.RetryTime > 0 {
				budget = r.RetryTime
			}
			if budget < 0 {
				return nil, lost(err)
			}
			wait = backoff(attempt, 250*time.Millisecond, 20*time.Second)
			elapsed := time.Since(start) - waited429
			var outage time.Duration // of an outage that began before this request
			if down, gaveUp := c.reach.downSince(); c.opts.OutageClock && herr == nil && !down.IsZero() && down.Before(start) {
				outage = time.Since(down)
				elapsed = max(elapsed, outage)
				if gaveUp {
					elapsed = budget // a request already gave up on it
				}
			}
			// The last wait is cut to what is left of the budget: the
			// request is retried until the budget is spent, not given
			// up a whole backoff early (a 20 s budget ended 12.7 s in).
			if elapsed < budget && elapsed+wait > budget {
				wait = budget - elapsed
			}
			if elapsed >= budget || wait < 0 {
				if c.opts.OutageClock && herr == nil {
					c.reach.gaveUp()
				}
				tries := "attempts"
				if attempt == 1 {
					tries = "attempt"
				}
				also := ""
				if outage > 0 {
					also = fmt.Sprintf("; the server has not answered for %s", outage.Round(100*time.Millisecond))
				}
				return nil, lost(fmt.Errorf("%w (gave up after %d %s in %s%s)", err, attempt, tries, time.Since(start).Round(100*time.Millisecond), also))
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

// lost marks err, the last of a request's attempts, as
// replicate.ErrUnreachable when no attempt got an answer from the server
// (a NetError), its text unchanged; an HTTP error is left as it is.
func lost(err error) error {
	var ne *NetError
	if !errors.As(err, &ne) {
		return err
	}
	return unreachable{err}
}

// unreachable is an error of a server that never answered.
type unreachable struct{ error }

func (u unreachable) Unwrap() []error { return []error{u.error, replicate.ErrUnreachable} }

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
	return ctxwait.Sleep(ctx, wait)
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
	if r.AttemptTimeout > 0 {
		limit = min(limit, r.AttemptTimeout)
	}
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
		ne := &NetError{Op: r.Method + " " + c.redactedPath(r.Path), Err: stripURLError(err)}
		if timedOut {
			ne.Err = errAttemptTimeout
		}
		if ctx.Err() == nil && retryable(ne) {
			c.reach.failedAttempt(c.URL(), t0, ne) // no answer (WatchReach)
		}
		return nil, func() {}, ne
	}
	if c.reach.down.Load() {
		c.reach.answered(c.URL(), t0)
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
