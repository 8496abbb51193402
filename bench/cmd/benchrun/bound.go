package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/internal/dataset"
)

// The fleet's request-rate bound: each PouchDB Server is one
// single-threaded node process, so a copy cannot finish before the busier
// server has answered every request sofa sent it. Each kind of request
// ("PUT /db", "POST /db/_bulk_docs") costs the server differently, so the
// bound charges every kind at its own rate, measured with the requests sofa
// would send (same shapes and sizes), at the best of boundLevels requests
// in flight (more in flight costs a single-threaded server more memory
// and GC, fewer leaves it idle between round trips):
//
//	bound(server) = sum over kinds of count(kind) / rate(kind)
//	bound         = max(bound(source), bound(target))
//
// Kinds sofa sent fewer than nDBs/10 times (GET /, GET /_all_dbs, one-off
// reads) are charged at the GET /db rate of the same server.

// boundInFlight is the number of requests in flight of the server's
// overall GET /db rate (the record's server_rate_rps).
const boundInFlight = 16

// boundLevels are the numbers of requests in flight a kind's rate is
// measured at; the highest rate is charged, so the bound is the server at
// its best.
var boundLevels = []int{2, 4, 16}

// kindsOut is the part of sofa's --json summary the bound reads.
type kindsOut struct {
	// RequestsByKind: endpoint ("source", "target") -> kind -> attempts.
	RequestsByKind map[string]map[string]int64 `json:"requests_by_kind"`
}

// sofaKinds returns the requests_by_kind of sofa's --json output; an error
// when it has none (a sofa that does not report it).
func sofaKinds(o *outcome) (map[string]map[string]int64, error) {
	var k kindsOut
	if err := o.lastJSON(&k); err != nil {
		return nil, err
	}
	if len(k.RequestsByKind) == 0 {
		return nil, fmt.Errorf("sofa --json has no requests_by_kind")
	}
	return k.RequestsByKind, nil
}

// boundCase describes one fleet case for the bound.
type boundCase struct {
	nDBs    int    // databases copied
	docs    int    // documents per database
	docSize int    // body bytes per document
	srcURL  string // the loaded source server
	// srcServer is the source server's process (for its CPU time);
	// nil: not known
	srcServer *server
	// inlineDocs: sofa reads an initial copy with
	// _changes?include_docs=true from this source (couch.Caps.InlineDocsFeed:
	// PouchDB Server), else with the plain feed.
	inlineDocs bool
	// srcDB names the i-th source database (0 <= i < nDBs).
	srcDB func(i int) string
	// kinds is sofa's requests_by_kind: server -> kind -> count.
	kinds map[string]map[string]int64
}

// frequent is the count from which a kind gets its own measured rate.
func (c boundCase) frequent() int64 { return int64(max(1, c.nDBs/10)) }

// perDB is count/nDBs rounded, at least 1: how many requests of a kind
// sofa sent per database.
func (c boundCase) perDB(server, kind string) int {
	return max(1, int(math.Round(float64(c.kinds[server][kind])/float64(c.nDBs))))
}

// kindCost is one row of the bound: a kind, how often sofa sent it to the
// server, and what that cost at the rate charged.
type kindCost struct {
	Server string  // "source" or "target"
	Kind   string  // e.g. "POST /db/_bulk_docs"
	Count  int64   // requests sofa sent
	Rate   float64 // requests/s charged; 0: no rate known
	// RateOf is the kind whose measured rate is charged: Kind itself,
	// or "GET /db" for a rare kind or one without a probe.
	RateOf string
	Secs   float64 // Count / Rate
}

// bound is the request-rate bound of one sofa run.
type bound struct {
	costs []kindCost
	secs  map[string]float64            // server -> seconds
	rates map[string]map[string]float64 // server -> kind -> req/s measured
	// cpuMS: server -> kind -> the server's CPU ms per request, the
	// least of the levels measured (the server at its most frugal)
	cpuMS  map[string]map[string]float64
	server string // the busier server
	ms     int64  // bound of the run
}

// costs charges every kind sofa sent to server at its measured rate, or at
// the GET /db rate when it is rare (count < frequent) or was not measured;
// rows come in descending count, then kind order. It returns the rows and
// their total seconds; an error when a rate is missing for a kind sofa sent.
func costs(server string, counts map[string]int64, rates map[string]float64, frequent int64) ([]kindCost, float64, error) {
	var rows []kindCost
	var total float64
	for kind, n := range counts {
		if n <= 0 {
			continue
		}
		of := kind
		if _, ok := rates[kind]; !ok || n < frequent {
			of = "GET /db"
		}
		rate := rates[of]
		if rate <= 0 {
			return nil, 0, fmt.Errorf("%s: no %s rate to charge %d %s at", server, of, n, kind)
		}
		s := float64(n) / rate
		rows = append(rows, kindCost{Server: server, Kind: kind, Count: n, Rate: rate, RateOf: of, Secs: s})
		total += s
	}
	slices.SortFunc(rows, func(a, b kindCost) int {
		if a.Count != b.Count {
			return int(b.Count - a.Count)
		}
		return strings.Compare(a.Kind, b.Kind)
	})
	return rows, total, nil
}

// requestBound measures the rates of the kinds sofa sent (the source's
// against the loaded source, read-only; the target's on a scratch server
// it starts and stops) and returns the bound.
func (e *env) requestBound(ctx context.Context, c boundCase) (*bound, error) {
	b := &bound{secs: map[string]float64{},
		rates: map[string]map[string]float64{"source": {}, "target": {}},
		cpuMS: map[string]map[string]float64{"source": {}, "target": {}}}
	for _, lvl := range boundLevels {
		src, err := e.sourceRates(ctx, c, lvl)
		if err != nil {
			return nil, fmt.Errorf("source rates: %w", err)
		}
		tgt, err := e.targetRates(ctx, c, lvl)
		if err != nil {
			return nil, fmt.Errorf("target rates: %w", err)
		}
		for server, p := range map[string]*probeSet{"source": src, "target": tgt} {
			for k, r := range p.rates {
				b.rates[server][k] = max(b.rates[server][k], r)
			}
			for k, ms := range p.cpuMS {
				if old, ok := b.cpuMS[server][k]; !ok || ms < old {
					b.cpuMS[server][k] = ms
				}
			}
		}
	}
	for _, server := range []string{"source", "target"} {
		rows, s, err := costs(server, c.kinds[server], b.rates[server], c.frequent())
		if err != nil {
			return nil, err
		}
		b.costs = append(b.costs, rows...)
		b.secs[server] = s
		if b.server == "" || s > b.secs[b.server] {
			b.server = server
		}
	}
	b.ms = int64(b.secs[b.server] * 1000)
	return b, nil
}

// probeSet is what the probes of one server at one level measured: kind
// -> requests/s, and kind -> the server's CPU ms per request (from /proc
// over the probe; absent where the server's usage is unknown).
type probeSet struct {
	srv   *server
	rates map[string]float64
	cpuMS map[string]float64
}

func newProbeSet(srv *server) *probeSet {
	return &probeSet{srv: srv, rates: map[string]float64{}, cpuMS: map[string]float64{}}
}

// rateRun measures one kind into p, inFlight requests at a time; see
// requestRate.
func (e *env) rateRun(ctx context.Context, inFlight int, p *probeSet, kind string, n int, next func(ctx context.Context, i int) (*http.Request, error)) (int, error) {
	before, _ := p.srv.usage()
	r, done, err := requestRate(ctx, inFlight, e.cfg.rateProbe, n, next)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", kind, err)
	}
	if done == 0 {
		return 0, fmt.Errorf("%s: no request answered within %s", kind, e.cfg.rateProbe)
	}
	after, _ := p.srv.usage()
	p.rates[kind] = r
	if after > before {
		p.cpuMS[kind] = float64(after-before) / float64(done)
	}
	return done, nil
}

// sourceRates measures, against the source's own databases, GET /db,
// GET /db/_security and GET /db/_revs_limit (always: the full-fidelity
// bound charges them, whatever sofa sent), and the initial copy's
// GET /db/_changes (include_docs, first page) when sofa sent it often.
func (e *env) sourceRates(ctx context.Context, c boundCase, inFlight int) (*probeSet, error) {
	rates := newProbeSet(c.srcServer)
	counts, freq := c.kinds["source"], c.frequent()
	get := func(suffix string) func(ctx context.Context, i int) (*http.Request, error) {
		return func(ctx context.Context, i int) (*http.Request, error) {
			return newRequest(ctx, http.MethodGet, c.srcURL+"/"+c.srcDB(i%c.nDBs)+suffix, nil)
		}
	}
	if _, err := e.rateRun(ctx, inFlight, rates, "GET /db", 0, get("")); err != nil {
		return nil, err
	}
	if _, err := e.rateRun(ctx, inFlight, rates, "GET /db/_security", 0, get("/_security")); err != nil {
		return nil, err
	}
	if _, err := e.rateRun(ctx, inFlight, rates, "GET /db/_revs_limit", 0, get("/_revs_limit")); err != nil && !strings.Contains(err.Error(), "HTTP 404") {
		return nil, err // a 404: a server without _revs_limit (PouchDB Server), nothing to copy
	}
	if counts["GET /db/_changes"] >= freq {
		// What sofa asks on an initial copy: couch.DB.ChangesWithDocs
		// where the server's Caps say so, else couch.DB.Changes.
		q := "/_changes?style=all_docs&feed=normal&since=0&limit=" + strconv.Itoa(couch.DefaultChangesPage)
		if c.inlineDocs {
			q = "/_changes?style=all_docs&feed=normal&include_docs=true&since=0&limit=" + strconv.Itoa(couch.DefaultChangesPage)
		}
		if _, err := e.rateRun(ctx, inFlight, rates, "GET /db/_changes", 0, get(q)); err != nil {
			return nil, err
		}
	}
	return rates, nil
}

// targetRates measures the target's kinds on a fresh scratch server, in
// the order sofa sends them to each database: PUT /db (always: it creates
// the probe databases), PUT /db/_local, POST /db/_bulk_docs, GET /db
// (always), GET and PUT /db/_security.
func (e *env) targetRates(ctx context.Context, c boundCase, inFlight int) (*probeSet, error) {
	s, err := e.startServer(ctx)
	if err != nil {
		return nil, err
	}
	defer e.stopServer(s)
	rates := newProbeSet(s)
	counts, freq := c.kinds["target"], c.frequent()
	dbURL := func(i int) string { return fmt.Sprintf("%s/probe-%06d", s.URL, i) }
	dbs, err := e.rateRun(ctx, inFlight, rates, "PUT /db", c.nDBs, func(ctx context.Context, i int) (*http.Request, error) {
		return newRequest(ctx, http.MethodPut, dbURL(i), nil)
	})
	if err != nil {
		return nil, err
	}
	if counts["PUT /db/_local"] >= freq {
		// sofa's claim, then its checkpoint(s): distinct _local docs.
		per := c.perDB("target", "PUT /db/_local")
		_, err := e.rateRun(ctx, inFlight, rates, "PUT /db/_local", dbs*per, func(ctx context.Context, i int) (*http.Request, error) {
			j := i % per
			body := checkpointBody
			if j == 0 {
				body = claimBody
			}
			return newRequest(ctx, http.MethodPut, fmt.Sprintf("%s/_local/probe-%d", dbURL(i/per), j), body)
		})
		if err != nil {
			return nil, err
		}
	}
	if counts["POST /db/_bulk_docs"] >= freq {
		bodies, err := bulkBodies(c, c.perDB("target", "POST /db/_bulk_docs"))
		if err != nil {
			return nil, err
		}
		per := len(bodies)
		_, err = e.rateRun(ctx, inFlight, rates, "POST /db/_bulk_docs", dbs*per, func(ctx context.Context, i int) (*http.Request, error) {
			return newRequest(ctx, http.MethodPost, dbURL(i/per)+"/_bulk_docs", bodies[i%per])
		})
		if err != nil {
			return nil, err
		}
	}
	if _, err := e.rateRun(ctx, inFlight, rates, "GET /db", 0, func(ctx context.Context, i int) (*http.Request, error) {
		return newRequest(ctx, http.MethodGet, dbURL(i%dbs), nil)
	}); err != nil {
		return nil, err
	}
	if counts["GET /db/_security"] >= freq {
		if _, err := e.rateRun(ctx, inFlight, rates, "GET /db/_security", 0, func(ctx context.Context, i int) (*http.Request, error) {
			return newRequest(ctx, http.MethodGet, dbURL(i%dbs)+"/_security", nil)
		}); err != nil {
			return nil, err
		}
	}
	if counts["PUT /db/_security"] >= freq {
		if _, err := e.rateRun(ctx, inFlight, rates, "PUT /db/_security", 0, func(ctx context.Context, i int) (*http.Request, error) {
			return newRequest(ctx, http.MethodPut, dbURL(i%dbs)+"/_security", securityBody)
		}); err != nil {
			return nil, err
		}
	}
	return rates, nil
}

// bulkBodies returns perDB `_bulk_docs` bodies (new_edits=false) that
// together hold one database of the case: each carries
// round(docs/perDB) synthetic documents of docSize bytes, as sofa's do
// on average, with distinct ids.
func bulkBodies(c boundCase, perDB int) ([][]byte, error) {
	perReq := max(1, int(math.Round(float64(c.docs)/float64(perDB))))
	var revs [][]byte
	db := dataset.Synth{Name: "probe", Docs: perDB * perReq, MinSize: c.docSize, Seed: 1}.DB()
	if err := db.Each(func(rev []byte) error { revs = append(revs, rev); return nil }); err != nil {
		return nil, err
	}
	bodies := make([][]byte, perDB)
	for i := range bodies {
		b := []byte(`{"new_edits":false,"docs":[`)
		for j, rev := range revs[i*perReq : (i+1)*perReq] {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, rev...)
		}
		bodies[i] = append(b, "]}"...)
	}
	return bodies, nil
}

// Bodies shaped and sized like the ones sofa writes.
var (
	claimBody      = []byte(`{"claimed_by":"sofa replicate"}`)
	checkpointBody = []byte(`{"session_id":"047447192ebccc56db537d1ff2fa76f2","source_last_seq":100,"replication_id_version":1,"replicator":"sofa","sofa_source_instance":"1796005549906","sofa_target_only":true,"sofa_anchor":{"id":"doc-00000099","rev":"1-bc5db6a055cbe3e54ca8ad7ae009e9e5"},"history":[{"session_id":"047447192ebccc56db537d1ff2fa76f2","start_time":"Mon, 30 Nov 2026 02:25:52 UTC","end_time":"Mon, 30 Nov 2026 02:25:52 UTC","start_last_seq":0,"end_last_seq":100,"recorded_seq":100,"missing_checked":100,"missing_found":100,"docs_read":100,"docs_written":100,"doc_write_failures":0}]}`)
	securityBody   = []byte(`{"admins":{"names":[],"roles":[]},"members":{"names":[],"roles":[]}}`)
)

// table returns the bound's table: one row per server and kind, then the
// servers' totals, the bound and sofa/bound (sofaMS: sofa's time, 0 when
// it failed; peak: sofa's peak databases in flight).
func (b *bound) table(title string, sofaMS int64, peak int) *table {
	t := &table{title: title, head: []string{"server", "kind", "count", "req/s", "rate of", "s", "server CPU ms/req"}}
	for _, c := range b.costs {
		of := "itself"
		if c.RateOf != c.Kind {
			of = c.RateOf
		}
		cpu := "-"
		if ms, ok := b.cpuMS[c.Server][c.RateOf]; ok {
			cpu = fmt.Sprintf("%.2f", ms)
		}
		t.add(c.Server, c.Kind, strconv.FormatInt(c.Count, 10), fmt.Sprintf("%.0f", c.Rate), of, fmt.Sprintf("%.2f", c.Secs), cpu)
	}
	t.note("source %.2f s, target %.2f s -> request-rate bound = %s s (%s; each kind's best rate at %v requests in flight)",
		b.secs["source"], b.secs["target"], secs(b.ms), b.server, boundLevels)
	t.note("sofa/bound     = %s (peak databases in flight %d)", check(ratio(sofaMS, b.ms), sofaMS, b.ms, "<=", 1.3), peak)
	return t
}

// charge is count requests of one kind on one server ("source",
// "target") that a correct copy needs.
type charge struct {
	server, kind string
	count        float64
}

// needed is the bound of the requests any correct copy needs (see
// minimal).
type needed struct {
	ms       int64   // the bound: the largest of src, tgt and cpu/cores
	src, tgt float64 // seconds each server takes alone at its measured rates
	// cpu is the CPU seconds both servers spend on those requests, at
	// their measured CPU per request; 0: not measured. On a machine
	// they share, no copy beats cpu/cores.
	cpu   float64
	cores int
}

// minimal is the bound of the requests any correct copy of the case needs,
// whatever the tool chooses to send, at the rates measured for this run:
// per database, on the target PUT /db and one POST /db/_bulk_docs
// (new_edits=false) per 500 documents, on the source one read of its
// documents (GET /db/_changes with them inline, charged at the rate
// measured for sofa's feed; GET /db's when none was measured). Unlike the
// request-rate bound it does not charge what sofa chose to send (its
// checkpoints, claims, count checks), so a tool sending fewer requests
// cannot beat it.
//
// With props the source side also reads each database's properties,
// GET /db/_security and GET /db/_revs_limit at their measured rates (the
// latter only where the server has it): what a server copy needs to be
// equal in the conformance sense (docs/conformance.md: "the database's
// _security and _revs_limit wherever the copy path carries them"). The
// target side is the same either way: a property left at its default
// (empty _security, _revs_limit 1000, as in the fleet's databases) needs
// no write.
//
// Both servers run on this machine's cores (cores): besides each
// server's own time, the bound is the CPU those requests cost the two
// servers together, spread over every core. The tool's own CPU is not
// charged.
func (b *bound) minimal(c boundCase, props bool, cores int) (needed, error) {
	n := float64(c.nDBs)
	rt, rs := b.rates["target"], b.rates["source"]
	if rt["PUT /db"] <= 0 || rt["POST /db/_bulk_docs"] <= 0 {
		return needed{}, fmt.Errorf("no PUT /db or _bulk_docs rate measured on the target")
	}
	bulks := math.Ceil(float64(max(c.docs, 1)) / 500)
	charges := []charge{{"target", "PUT /db", n}, {"target", "POST /db/_bulk_docs", n * bulks}}
	read := "GET /db/_changes"
	if rs[read] <= 0 {
		read = "GET /db"
	}
	if rs[read] <= 0 {
		return needed{}, fmt.Errorf("no read rate measured on the source")
	}
	charges = append(charges, charge{"source", read, n})
	if props {
		if rs["GET /db/_security"] <= 0 {
			return needed{}, fmt.Errorf("no GET /db/_security rate measured on the source")
		}
		charges = append(charges, charge{"source", "GET /db/_security", n})
		if rs["GET /db/_revs_limit"] > 0 { // none: the server has no _revs_limit
			charges = append(charges, charge{"source", "GET /db/_revs_limit", n})
		}
	}
	nd := needed{cores: max(cores, 1)}
	cpuKnown := true
	for _, ch := range charges {
		t := ch.count / b.rates[ch.server][ch.kind]
		if ch.server == "source" {
			nd.src += t
		} else {
			nd.tgt += t
		}
		ms, ok := b.cpuMS[ch.server][ch.kind]
		cpuKnown = cpuKnown && ok
		nd.cpu += ch.count * ms / 1000
	}
	if !cpuKnown {
		nd.cpu = 0
	}
	nd.ms = int64(max(nd.src, nd.tgt, nd.cpu/float64(nd.cores)) * 1000)
	return nd, nil
}
