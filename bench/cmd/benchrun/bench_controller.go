package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/sofadb/sofa/internal/faultproxy"
)

// ctlCase is one kind of overload the controller benchmark puts sofa
// through.
type ctlCase struct {
	key   string // as named in -ctl-cases
	title string
	// limits are the proxies' (a cap sofa is not told).
	limits faultproxy.Limits
	// maxDBsOpen, when positive, is CouchDB's own limit (couchdb/
	// max_dbs_open) set on both servers: the real all_dbs_active.
	maxDBsOpen int
}

// ctlCases are the cases of -ctl-cases that the server kind has.
func ctlCases(cfg *config, couch bool) []ctlCase {
	all := []ctlCase{
		{key: "429", title: fmt.Sprintf("proxy answers 429 above %d in flight per server", cfg.ctlK),
			limits: faultproxy.Limits{MaxInFlight: cfg.ctlK}},
		{key: "dbs-active", title: fmt.Sprintf("proxy answers 500 all_dbs_active above %d in flight per server", cfg.ctlK),
			limits: faultproxy.Limits{MaxInFlight: cfg.ctlK, AllDBsActive: true}},
		{key: "max-dbs-open", title: fmt.Sprintf("CouchDB max_dbs_open = %d on both servers", cfg.ctlMaxDBsOpen),
			maxDBsOpen: cfg.ctlMaxDBsOpen},
	}
	var out []ctlCase
	for _, c := range all {
		if !strings.Contains(","+cfg.ctlCases+",", ","+c.key+",") || c.maxDBsOpen > 0 && !couch {
			continue
		}
		out = append(out, c)
	}
	return out
}

// setMaxDBsOpen sets couchdb/max_dbs_open on a running CouchDB (the
// setting applies at once, no restart).
func setMaxDBsOpen(ctx context.Context, s *server, n int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.URL+"/_node/_local/_config/couchdb/max_dbs_open",
		strings.NewReader(strconv.Quote(strconv.Itoa(n))))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("set max_dbs_open on %s: HTTP %d", redact(s.URL), resp.StatusCode)
	}
	return nil
}

// benchController: controller quality. For each case of -ctl-cases, both
// servers sit behind a proxy that answers 429 (or CouchDB's 500
// all_dbs_active) above cfg.ctlK requests in flight, or, on CouchDB, both
// run with max_dbs_open lowered (the server's own all_dbs_active). A sweep
// of `--fixed --max-requests N` is compared with the adaptive controller in
// the same run: its throughput should be within 15% of the best fixed
// setting with under 2% of requests rejected (429s and 500s counted at
// the proxies).
func benchController(ctx context.Context, e *env) error {
	src, err := e.startServer(ctx)
	if err != nil {
		return err
	}
	if err := e.load(ctx, src.URL, synthDBs("ctl", e.cfg.ctlDBs, e.cfg.ctlDocs, 512), 8); err != nil {
		return err
	}
	for _, c := range ctlCases(e.cfg, src.couch()) {
		if err := ctlRun(ctx, e, src, c); err != nil {
			return err
		}
	}
	return nil
}

func ctlRun(ctx context.Context, e *env, src *server, c ctlCase) error {
	if c.maxDBsOpen > 0 {
		if err := setMaxDBsOpen(ctx, src, c.maxDBsOpen); err != nil {
			return err
		}
	}
	psrc, err := startProxy(src, 0, c.limits)
	if err != nil {
		return err
	}
	defer psrc.Stop()
	base := record{Bench: "controller", Case: fmt.Sprintf("%d dbs x %d docs of 512 B, %s", e.cfg.ctlDBs, e.cfg.ctlDocs, c.title)}
	t := &table{title: "controller: " + base.Case,
		head: []string{"setting", "status", "time s", "docs/s", "requests", "rejected", "rejected %", "limit min..max", "verify"}}
	type result struct {
		r      record
		tput   float64
		reject float64
	}
	var fixed []result
	var adaptive *result
	settings := make([]int, 0, len(e.cfg.ctlSweep)+1)
	settings = append(settings, e.cfg.ctlSweep...)
	settings = append(settings, 0) // 0: adaptive
	for _, n := range settings {
		tgt, err := e.startServer(ctx)
		if err != nil {
			return err
		}
		if c.maxDBsOpen > 0 {
			if err := setMaxDBsOpen(ctx, tgt, c.maxDBsOpen); err != nil {
				return err
			}
		}
		ptgt, err := startProxy(tgt, 0, c.limits)
		if err != nil {
			return err
		}
		psrc.ResetStats()
		b := base
		args := []string{"replicate", psrc.URL, ptgt.URL, "--json"}
		if n > 0 {
			b.Tool = "sofa --fixed --max-requests " + strconv.Itoa(n)
			args = append(args, "--fixed", "--max-requests", strconv.Itoa(n))
		} else {
			b.Tool = "sofa adaptive"
		}
		r, o := e.runTool(ctx, b, []*server{src, tgt}, e.sofa, args...)
		s := applySofa(&r, o)
		sent := r.Requests
		r.Requests, r.Throttled = proxies{psrc, ptgt}.totals()
		ptgt.Stop()
		if r.OK {
			r.Verify = e.oracle(ctx, src.URL, tgt.URL, true, !tgt.couch())
			r.OK = r.Verify == "equal"
		}
		res := result{r: r}
		if r.OK && r.TimeMS > 0 {
			res.tput = float64(r.Docs) / (float64(r.TimeMS) / 1000)
		}
		if r.Requests > 0 {
			res.reject = 100 * float64(r.Throttled) / float64(r.Requests)
		}
		lim := "-"
		if s != nil {
			lo, hi := 0, 0
			for i, h := range s.Hosts {
				if i == 0 || h.MinLimit < lo {
					lo = h.MinLimit
				}
				hi = max(hi, h.MaxLimit)
			}
			lim = fmt.Sprintf("%d..%d", lo, hi)
		}
		r.Extra = map[string]any{"docs_per_s": res.tput, "rejected_pct": res.reject, "sofa_requests": sent, "limit_range": lim, "case": c.key}
		e.sink.write(r)
		e.logf("controller (%s): %s: %s in %s, %.1f%% rejected", c.key, b.Tool, status(r), secs(r.TimeMS), res.reject)
		t.add(b.Tool, status(r), secs(r.TimeMS), fmt.Sprintf("%.0f", res.tput), strconv.FormatInt(r.Requests, 10),
			strconv.FormatInt(r.Throttled, 10), fmt.Sprintf("%.2f", res.reject), lim, firstNonEmpty(r.Verify, "-"))
		if n > 0 {
			fixed = append(fixed, res)
		} else {
			adaptive = &res
		}
		e.stopServer(tgt)
	}
	best := result{}
	for _, f := range fixed {
		if f.tput > best.tput {
			best = f
		}
	}
	if adaptive != nil && best.tput > 0 && adaptive.tput > 0 {
		rel := adaptive.tput / best.tput
		verdict := "met"
		if rel < 0.85 {
			verdict = "NOT met"
		}
		t.note("adaptive / best fixed (%s) throughput = %.2f (target >= 0.85: %s)", best.r.Tool, rel, verdict)
		verdict = "met"
		if adaptive.reject >= 2 {
			verdict = "NOT met"
		}
		t.note("adaptive rejected = %.2f%% of requests (target < 2%%: %s)", adaptive.reject, verdict)
	} else {
		t.note("adaptive vs best fixed: not measured (a run failed)")
	}
	t.note("requests and rejections (429s, and 500s: injected all_dbs_active or the server's own) as counted by the two proxies; limit = sofa's per-host in-flight limit (min..max over the run)")
	t.print(os.Stdout)
	return nil
}
