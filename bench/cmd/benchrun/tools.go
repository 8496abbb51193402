package main

import (
	"context"
)

// runTool measures one tool run into a copy of base: usage, TimeMS (the
// wall time), the PouchDB Servers' CPU time meanwhile, OK (exit 0) and
// Error. The caller adds tool-specific fields and checks.
func (e *env) runTool(ctx context.Context, base record, servers []*server, name string, args ...string) (record, *outcome) {
	r := base
	var before, redBefore int64
	for _, s := range servers {
		c, _ := s.usage()
		before += c
		redBefore += s.reductions(ctx)
	}
	o, err := e.measure(ctx, e.cfg.timeout, name, args...)
	if err != nil {
		r.Error = err.Error()
		return r, &outcome{}
	}
	var after, redAfter int64
	for _, s := range servers {
		c, _ := s.usage()
		after += c
		redAfter += s.reductions(ctx)
	}
	if redBefore > 0 && redAfter > redBefore {
		r.ServerReductions = redAfter - redBefore
	}
	r.usage = o.usage
	r.TimeMS = o.WallMS
	r.ServerCPUMS = after - before
	r.OK = o.Exit == 0
	if !r.OK {
		r.Error = o.errText()
	}
	return r, o
}

// peerResult is the JSON line every bench/*.js peer prints.
type peerResult struct {
	Tool  string  `json:"tool"`
	OK    *bool   `json:"ok"`
	MS    float64 `json:"ms"`
	Docs  int64   `json:"docs"`
	Bytes int64   `json:"bytes"`
	Error string  `json:"error"`
}

// applyPeer copies a peer's own result line into r.
func applyPeer(r *record, o *outcome) peerResult {
	var p peerResult
	if err := o.lastJSON(&p); err != nil {
		if r.OK {
			r.OK, r.Error = false, err.Error()
		}
		return p
	}
	r.Docs = p.Docs
	if p.OK != nil && !*p.OK {
		r.OK = false
		r.Error = firstNonEmpty(p.Error, r.Error, "tool reported ok=false")
	}
	return p
}

// sofaResult holds the parts of sofa's --json output the benchmarks read:
// one-database runs (stats, http) and whole-server runs (dbs_*, hosts).
type sofaResult struct {
	Status string `json:"status"`
	Stats  struct {
		DocsWritten int64 `json:"docs_written"`
	} `json:"stats"`
	HTTP struct {
		Requests  int64 `json:"requests"`
		Throttled int64 `json:"throttled"`
	} `json:"http"`
	DBsTotal    int   `json:"dbs_total"`
	DBsOK       int   `json:"dbs_ok"`
	DocsWritten int64 `json:"docs_written"`
	Hosts       []struct {
		Host      string `json:"host"`
		Requests  int64  `json:"requests"`
		Overloads int64  `json:"overloads"`
		MaxLimit  int    `json:"max_limit"`
		MinLimit  int    `json:"min_limit"`
		Limit     int    `json:"limit"`
	} `json:"hosts"`
	Concurrency struct {
		Peak int `json:"peak"`
	} `json:"concurrency"`
}

// applySofa reads sofa's --json output into r (docs, requests).
func applySofa(r *record, o *outcome) *sofaResult {
	var s sofaResult
	if err := o.lastJSON(&s); err != nil {
		if r.OK {
			r.OK, r.Error = false, "sofa --json: "+err.Error()
		}
		return nil
	}
	if len(s.Hosts) > 0 || s.DBsTotal > 0 {
		r.Docs = s.DocsWritten
		for _, h := range s.Hosts {
			r.Requests += h.Requests
		}
	} else {
		r.Docs = s.Stats.DocsWritten
		r.Requests = s.HTTP.Requests
		r.Throttled = s.HTTP.Throttled
	}
	return &s
}
