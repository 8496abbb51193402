package main

import (
	"time"

	"github.com/sofadb/sofa/internal/faultproxy"
)

// proxies is a set of fault proxies, each in front of one server, run in
// this process (their CPU time is not counted against any tool).
type proxies []*faultproxy.Proxy

// startProxy starts a proxy in front of s that delays every request by
// delay (0: none) and applies limits.
func startProxy(s *server, delay time.Duration, limits faultproxy.Limits) (*faultproxy.Proxy, error) {
	p, err := faultproxy.Start(s.URL, 1)
	if err != nil {
		return nil, err
	}
	if delay > 0 {
		if err := p.SetRules(faultproxy.Rule{Name: "latency", Delay: delay}); err != nil {
			p.Stop()
			return nil, err
		}
	}
	p.SetLimits(limits)
	return p, nil
}

// totals sums requests received and rejections over ps: the proxies'
// own 429 (or injected all_dbs_active) answers and the servers' 500s.
func (ps proxies) totals() (requests, rejected int64) {
	for _, p := range ps {
		st := p.Stats()
		requests += st.Requests
		rejected += st.Throttled + st.Upstream500
	}
	return requests, rejected
}
