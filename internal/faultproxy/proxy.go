package faultproxy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// Limits apply to every request before the rules. Zero fields mean no
// limit.
type Limits struct {
	// MaxInFlight answers 429 to a request that arrives while MaxInFlight
	// requests are already in progress.
	MaxInFlight int
	// RatePerSec answers 429 to requests above this rate (token bucket
	// with a burst of max(1, RatePerSec) requests).
	RatePerSec float64
	// RetryAfter is the Retry-After header sent with these 429 answers
	// (seconds); empty sends none, as CouchDB does.
	RetryAfter string
	// AllDBsActive makes the MaxInFlight and RatePerSec answers CouchDB's
	// 500 {"error":"error","reason":"all_dbs_active"} (what CouchDB 3.5
	// answers a _changes request once max_dbs_open databases are in use)
	// instead of 429. They count as Throttled.
	AllDBsActive bool
	// MaxBodyBytes answers 413 {"error":"too_large"} to requests whose
	// body is longer than this many bytes; the body is not forwarded.
	MaxBodyBytes int64
	// ConnBytesPerSec caps each client connection's bandwidth, in bytes
	// per second in each direction (a congested or policed uplink that
	// one TCP connection cannot fill); it applies to connections open
	// when it is set, from their next read or write.
	ConnBytesPerSec int64
}

// Stats are the proxy's counters since start or the last ResetStats.
type Stats struct {
	// Requests counts requests received.
	Requests int64
	// Faults counts requests answered or altered by a fault: rules that
	// fired with a fault other than Forward, plus Throttled and TooLarge.
	Faults int64
	// Throttled counts 429 answers from Limits.MaxInFlight or RatePerSec.
	Throttled int64
	// TooLarge counts 413 answers from Limits.MaxBodyBytes.
	TooLarge int64
	// Upstream500 counts answers of status 500 the target gave to
	// forwarded requests (a CouchDB at max_dbs_open answers 500).
	Upstream500 int64
	// InFlight is the number of requests in progress now; MaxInFlight the
	// highest number seen at once (counting requests that were then
	// throttled).
	InFlight    int64
	MaxInFlight int64
	// Rules holds the counters of each rule by name, including rules since
	// removed.
	Rules map[string]RuleStats
}

// Proxy is a running fault-injecting reverse proxy. Its methods are safe
// for concurrent use.
type Proxy struct {
	// URL is the proxy's base URL, http://127.0.0.1:PORT, with the
	// target's path prefix if it had one.
	URL string

	target    *url.URL
	auth      *url.Userinfo // basic auth for requests that carry none
	transport *http.Transport
	srv       *http.Server
	ln        net.Listener
	stopped   chan struct{} // closed by Stop: stalled requests end
	stopOnce  sync.Once

	mu       sync.Mutex
	rules    []*compiledRule
	counters map[string]*ruleCounters
	limits   Limits
	limiter  *rate.Limiter
	rnd      *rand.Rand

	keepHost atomic.Bool

	requests, faults, throttled, tooLarge atomic.Int64
	upstream500                           atomic.Int64
	inFlight, maxInFlight                 atomic.Int64
}

// Start listens on a free 127.0.0.1 port and forwards to target (a server
// URL such as http://127.0.0.1:5984). The client's Authorization header is
// forwarded; a request without one gets basic auth from the credentials in
// target, if it has any (so a test can hand out the proxy's bare URL in
// front of a server that needs an admin). seed seeds the random source
// of rule probabilities. Call Stop when done.
func Start(target string, seed uint64) (*Proxy, error) {
	tu, err := url.Parse(target)
	if err != nil || tu.Host == "" || (tu.Scheme != "http" && tu.Scheme != "https") {
		return nil, fmt.Errorf("faultproxy: bad target URL")
	}
	auth := tu.User
	tu.User = nil
	tu.Path = strings.TrimRight(tu.Path, "/")
	tu.RawPath = ""
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{
		URL:    "http://" + ln.Addr().String() + tu.Path,
		target: tu,
		auth:   auth,
		transport: &http.Transport{
			Proxy:               nil,
			DisableCompression:  true,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     30 * time.Second,
		},
		ln:       ln,
		stopped:  make(chan struct{}),
		counters: map[string]*ruleCounters{},
		rnd:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	go p.srv.Serve(&shapedListener{Listener: ln, p: p})
	return p, nil
}

// StartT is Start for a test: it fails t on error and stops the proxy at
// Cleanup. The seed is 1.
func StartT(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := Start(target, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// Stop closes the listener and every open connection, and returns once
// they are closed. Requests in progress are cut.
func (p *Proxy) Stop() {
	p.stopOnce.Do(func() { close(p.stopped) })
	_ = p.srv.Close()
	p.transport.CloseIdleConnections()
}

// KeepHost forwards each request with the Host header the client sent
// (the proxy's address) instead of the target's, and leaves its
// Accept-Encoding as it was: a signed request (S3's SigV4 signs both)
// stays valid through the proxy.
func (p *Proxy) KeepHost() { p.keepHost.Store(true) }

// SetRules replaces all rules. It returns an error, and changes nothing,
// when a rule's Path does not compile or a fault lacks its parameters.
func (p *Proxy) SetRules(rules ...Rule) error {
	compiled := make([]*compiledRule, len(rules))
	for i, r := range rules {
		cr, err := compile(r, i)
		if err != nil {
			return err
		}
		compiled[i] = cr
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cr := range compiled {
		c, ok := p.counters[cr.Name]
		if !ok {
			c = &ruleCounters{}
			p.counters[cr.Name] = c
		}
		cr.c = c
	}
	p.rules = compiled
	return nil
}

// AddRule appends one rule after the existing ones.
func (p *Proxy) AddRule(r Rule) error {
	p.mu.Lock()
	cur := make([]Rule, len(p.rules))
	for i, cr := range p.rules {
		cur[i] = cr.Rule
	}
	p.mu.Unlock()
	return p.SetRules(append(cur, r)...)
}

// SetLimits replaces the limits; the zero Limits removes them all.
func (p *Proxy) SetLimits(l Limits) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.limits = l
	p.limiter = nil
	if l.RatePerSec > 0 {
		p.limiter = rate.NewLimiter(rate.Limit(l.RatePerSec), max(1, int(l.RatePerSec)))
	}
}

// Stats returns a snapshot of the counters.
func (p *Proxy) Stats() Stats {
	s := Stats{
		Requests:    p.requests.Load(),
		Faults:      p.faults.Load(),
		Throttled:   p.throttled.Load(),
		TooLarge:    p.tooLarge.Load(),
		Upstream500: p.upstream500.Load(),
		InFlight:    p.inFlight.Load(),
		MaxInFlight: p.maxInFlight.Load(),
		Rules:       map[string]RuleStats{},
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, c := range p.counters {
		s.Rules[name] = RuleStats{Matched: c.matched.Load(), Fired: c.fired.Load(), Docs: c.docs.Load(), Gone: c.gone.Load()}
	}
	return s
}

// Rule returns the counters of the rule called name (zero if unknown).
func (p *Proxy) Rule(name string) RuleStats { return p.Stats().Rules[name] }

// ResetStats zeroes all counters (MaxInFlight included).
func (p *Proxy) ResetStats() {
	p.requests.Store(0)
	p.faults.Store(0)
	p.throttled.Store(0)
	p.tooLarge.Store(0)
	p.upstream500.Store(0)
	p.maxInFlight.Store(p.inFlight.Load())
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.counters {
		c.matched.Store(0)
		c.fired.Store(0)
		c.docs.Store(0)
		c.gone.Store(0)
	}
}

// pick returns the rule that handles the request, or nil, and counts it.
func (p *Proxy) pick(method, path, query string, early bool) *compiledRule {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.rules {
		// ResetMidRequest and StallMidRequest rules are tried early, before
		// the body is read;
		// the others after
		if r.Fault.early() != early || !r.matches(method, path, query) {
			continue
		}
		n := r.c.matched.Add(1)
		if n <= int64(r.After) {
			continue
		}
		if r.Times > 0 && r.c.fired.Load() >= int64(r.Times) {
			continue
		}
		if r.Probability > 0 && r.Probability < 1 && p.rnd.Float64() >= r.Probability {
			continue
		}
		if r.Fault != RejectDocs { // counted when documents are rejected
			r.c.fired.Add(1)
		}
		return r
	}
	return nil
}

// admit applies Limits.MaxInFlight and RatePerSec; it reports whether the
// request may go on and the Retry-After value for a refusal.
func (p *Proxy) admit(inFlight int64) (ok bool, retryAfter string, dbsActive bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.limits.MaxInFlight > 0 && inFlight > int64(p.limits.MaxInFlight) {
		return false, p.limits.RetryAfter, p.limits.AllDBsActive
	}
	if p.limiter != nil && !p.limiter.Allow() {
		return false, p.limits.RetryAfter, p.limits.AllDBsActive
	}
	return true, "", false
}

func (p *Proxy) connRate() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limits.ConnBytesPerSec
}

func (p *Proxy) maxBody() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limits.MaxBodyBytes
}

var errTooLarge = errors.New("faultproxy: request body too large")
