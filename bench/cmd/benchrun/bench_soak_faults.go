package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/internal/limit"
)

// soakPhase is one minute of a soak's fault cycle: the rules of the
// proxy in front of the source and of the one in front of the target.
type soakPhase struct {
	name     string
	src, tgt []faultproxy.Rule
}

// soakPhases are the faults of issue 12 point 3, a minute each: 503
// bursts from the target, connection resets on both sides, and the
// target unreachable (every connection reset before an answer).
var soakPhases = []soakPhase{
	{name: "target answers 503 to 30% of requests",
		tgt: []faultproxy.Rule{{Name: "target 503", Fault: faultproxy.Status, Status: 503, Probability: 0.3}}},
	{name: "10% of requests reset, source and target",
		src: []faultproxy.Rule{{Name: "source reset", Fault: faultproxy.Reset, Probability: 0.1}},
		tgt: []faultproxy.Rule{{Name: "target reset", Fault: faultproxy.Reset, Probability: 0.1}}},
	{name: "target unreachable",
		tgt: []faultproxy.Rule{{Name: "target down", Fault: faultproxy.Reset}}},
}

// soakFaultPhase is how long each fault phase lasts.
const soakFaultPhase = time.Minute

// soakFaults runs the fault cycle until ctx ends: every cycle starts
// with the phases of soakPhases, one after the other, and has no fault
// for the rest of it (cycle must exceed the phases). The rules are
// cleared when it returns, so the runs can catch up.
func soakFaults(ctx context.Context, e *env, cycle time.Duration, src, tgt *faultproxy.Proxy) {
	set := func(s, t []faultproxy.Rule) {
		_ = src.SetRules(s...)
		_ = tgt.SetRules(t...)
	}
	defer set(nil, nil)
	for {
		start := time.Now()
		for _, ph := range soakPhases {
			set(ph.src, ph.tgt)
			e.logf("soak: fault: %s for %s", ph.name, soakFaultPhase)
			if limit.Sleep(ctx, soakFaultPhase) != nil {
				return
			}
		}
		set(nil, nil)
		e.logf("soak: faults over until the next cycle")
		if limit.Sleep(ctx, cycle-time.Since(start)) != nil {
			return
		}
	}
}

// soakProxies starts a fault proxy in front of each server when
// -soak-faults is set and returns the URLs the runs use (the servers'
// own, and nil proxies, otherwise). The proxies add the servers'
// credentials; the caller stops them.
func soakProxies(e *env, src, tgt string) (srcURL, tgtURL string, srcP, tgtP *faultproxy.Proxy, err error) {
	if e.cfg.soakFaults <= 0 {
		return src, tgt, nil, nil, nil
	}
	if e.cfg.soakFaults <= time.Duration(len(soakPhases))*soakFaultPhase {
		return "", "", nil, nil, fmt.Errorf("soak: -soak-faults %s: a cycle must be longer than its %d fault phases of %s", e.cfg.soakFaults, len(soakPhases), soakFaultPhase)
	}
	if srcP, err = faultproxy.Start(src, 1); err != nil {
		return "", "", nil, nil, err
	}
	if tgtP, err = faultproxy.Start(tgt, 2); err != nil {
		srcP.Stop()
		return "", "", nil, nil, err
	}
	return srcP.URL, tgtP.URL, srcP, tgtP, nil
}

// soakFaultCounts says how often each fault fired.
func soakFaultCounts(src, tgt *faultproxy.Proxy) string {
	var parts []string
	for _, p := range []*faultproxy.Proxy{src, tgt} {
		st := p.Stats()
		for name, r := range st.Rules {
			parts = append(parts, fmt.Sprintf("%s %d of %d", name, r.Fired, r.Matched))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
