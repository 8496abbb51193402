// Package recproxy is a recording reverse proxy for end-to-end tests: it
// forwards every request to one server and records, per request, what was
// asked (method, path, query, Accept, Content-Type, body bytes) and what
// came back (status, Content-Type, body bytes counted as they stream), so
// that a test can say what travelled on the wire without trusting the code
// under test. It is built on net/http alone.
package recproxy

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Exchange is one request and its answer.
type Exchange struct {
	Method   string
	Path     string // escaped path as sent
	Query    string // raw query
	Accept   string // request Accept header
	ReqType  string // request Content-Type
	ReqBytes int64  // request body bytes forwarded
	// ReqJSON is the body of a POST of JSON up to 64 KiB (the keys of a
	// `_dbs_info` or `_revs_diff`), "" for any other request.
	ReqJSON string
	// AuthScheme is the scheme of the request's Authorization header
	// ("Basic"), "" without one; Cookies names the cookies it carried.
	// Neither holds a credential.
	AuthScheme string
	Cookies    []string
	Status     int
	RespType   string // answer Content-Type
	// RespBytes counts the answer body bytes passed to the client (as
	// sent: the proxy asks for identity encoding).
	RespBytes int64
	// Start is when the request arrived, End when its answer was passed
	// on whole (see MaxInFlight).
	Start, End time.Time
}

// MaxInFlight is the most of es that were in flight at one instant.
func MaxInFlight(es []Exchange) int {
	type edge struct {
		at time.Time
		d  int
	}
	var edges []edge
	for _, e := range es {
		edges = append(edges, edge{e.Start, 1}, edge{e.End, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].d < edges[j].d // an end before a start at the same instant
	})
	n, peak := 0, 0
	for _, e := range edges {
		n += e.d
		peak = max(peak, n)
	}
	return peak
}

// Proxy is a running recording proxy. Its methods are safe for concurrent
// use.
type Proxy struct {
	// URL is the proxy's base URL, http://127.0.0.1:PORT.
	URL string

	srv  *http.Server
	mu   sync.Mutex
	log  []*record
	open openCount
}

// record is one exchange as the proxy keeps it: the byte counts grow
// while a body streams, outside the Exchange that Recorded copies under
// the proxy's lock, so that a copy never reads them while they are
// written.
type record struct {
	Exchange
	reqBytes, respBytes atomic.Int64
}

// Start listens on a free loopback port and forwards to target (a server
// URL). Credentials in target are sent as basic auth with requests that
// carry none. The proxy stops at t's Cleanup.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	tu, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	auth := tu.User
	tu.User = nil
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{URL: "http://" + ln.Addr().String()}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(tu)
			pr.Out.Host = tu.Host
			if pr.Out.Header.Get("Authorization") == "" && auth != nil {
				pw, _ := auth.Password()
				pr.Out.SetBasicAuth(auth.Username(), pw)
			}
		},
		Transport:     &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64},
		FlushInterval: -1,
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := &record{Exchange: Exchange{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
			Accept: r.Header.Get("Accept"), ReqType: r.Header.Get("Content-Type"), Start: time.Now()}}
		if a := r.Header.Get("Authorization"); a != "" {
			e.AuthScheme, _, _ = strings.Cut(a, " ")
		}
		for _, c := range r.Cookies() {
			e.Cookies = append(e.Cookies, c.Name)
		}
		if r.Method == http.MethodPost && strings.HasPrefix(e.ReqType, "application/json") &&
			r.ContentLength > 0 && r.ContentLength <= 64<<10 {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			e.ReqJSON = string(body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		p.mu.Lock()
		p.log = append(p.log, e)
		p.mu.Unlock()
		p.open.add(1)
		defer p.open.add(-1)
		if r.Body != nil {
			r.Body = &countBody{ReadCloser: r.Body, n: &e.reqBytes}
		}
		cw := &countWriter{ResponseWriter: w, e: e, mu: &p.mu}
		rp.ServeHTTP(cw, r)
		p.mu.Lock()
		e.End = time.Now()
		p.mu.Unlock()
	})
	p.srv = &http.Server{Handler: h}
	go p.srv.Serve(ln)
	t.Cleanup(func() { p.srv.Close() })
	return p
}

// UserURL returns the proxy URL with user and password as userinfo.
func (p *Proxy) UserURL(user, password string) string {
	u, _ := url.Parse(p.URL)
	u.User = url.UserPassword(user, password)
	return u.String()
}

// Exchanges returns a copy of what was recorded so far, in arrival order.
// Answers still streaming may be counted in part; call it after the
// client is done.
func (p *Proxy) Exchanges() []Exchange {
	p.open.wait()
	return p.Recorded()
}

// Recorded is Exchanges without waiting for the requests in progress
// (a long-lived feed never ends): theirs are listed, with the bytes
// counted so far.
func (p *Proxy) Recorded() []Exchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Exchange, len(p.log))
	for i, e := range p.log {
		out[i] = e.Exchange
		out[i].ReqBytes = e.reqBytes.Load()
		out[i].RespBytes = e.respBytes.Load()
	}
	return out
}

// Reset forgets what was recorded, once the requests in progress end.
func (p *Proxy) Reset() {
	p.open.wait()
	p.ResetNow()
}

// ResetNow forgets what was recorded without waiting for the requests in
// progress (their counts go on growing, unseen).
func (p *Proxy) ResetNow() {
	p.mu.Lock()
	p.log = nil
	p.mu.Unlock()
}

// Filter returns the exchanges whose method matches (empty: any) and whose
// path contains pathPart.
func (p *Proxy) Filter(method, pathPart string) []Exchange {
	var out []Exchange
	for _, e := range p.Exchanges() {
		if (method == "" || e.Method == method) && strings.Contains(e.Path, pathPart) {
			out = append(out, e)
		}
	}
	return out
}

// RespBytes sums the answer bytes of every exchange.
func (p *Proxy) RespBytes() int64 {
	var n int64
	for _, e := range p.Exchanges() {
		n += e.RespBytes
	}
	return n
}

type countBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countBody) Read(b []byte) (int, error) {
	n, err := c.ReadCloser.Read(b)
	c.n.Add(int64(n))
	return n, err
}

type countWriter struct {
	http.ResponseWriter
	e *record
	// mu is the proxy's lock, under which Recorded copies an exchange
	// while its answer may still be written; wrote is this writer's own
	// record that the header went out.
	mu    *sync.Mutex
	wrote bool
}

func (c *countWriter) WriteHeader(code int) {
	c.wrote = true
	c.mu.Lock()
	c.e.Status = code
	c.e.RespType = c.Header().Get("Content-Type")
	c.mu.Unlock()
	c.ResponseWriter.WriteHeader(code)
}

func (c *countWriter) Write(b []byte) (int, error) {
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	n, err := c.ResponseWriter.Write(b)
	c.e.respBytes.Add(int64(n))
	return n, err
}

func (c *countWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// openCount counts the requests in progress; wait returns once none is.
// Unlike a sync.WaitGroup it may be waited on while new requests start.
type openCount struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    int
}

func (c *openCount) add(d int) {
	c.mu.Lock()
	if c.cond == nil {
		c.cond = sync.NewCond(&c.mu)
	}
	c.n += d
	if c.n == 0 {
		c.cond.Broadcast()
	}
	c.mu.Unlock()
}

func (c *openCount) wait() {
	c.mu.Lock()
	if c.cond == nil {
		c.cond = sync.NewCond(&c.mu)
	}
	for c.n > 0 {
		c.cond.Wait()
	}
	c.mu.Unlock()
}
