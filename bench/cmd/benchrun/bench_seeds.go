package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sofadb/sofa/internal/dataset"
)

// benchSeeds: the shapes of CouchDB's "new replicator" benchmark, atts_db
// (attachments of 30 B, 41 KB and 2 MB) and large1kb (documents of about 1
// KB), one database each: sofa against CouchDB's replicator (defaults, and
// each -couch-rep-sweep setting), a first copy and then an incremental copy
// after 10% of the documents got a new revision with their attachments
// unchanged. Every tool reads the source through a byte-counting proxy, so
// the table shows what each copy transferred: an incremental copy should
// carry the new revisions' bodies, not their attachments again. Each tool
// copies into a database of its own on one target server.
func benchSeeds(ctx context.Context, e *env) error {
	type seedCase struct {
		preset string
		scale  float64
	}
	var cases []seedCase
	if e.cfg.seedsAttsScale > 0 {
		cases = append(cases, seedCase{dataset.PresetAtts, e.cfg.seedsAttsScale})
	}
	if e.cfg.seedsLargeScale > 0 {
		cases = append(cases, seedCase{dataset.PresetLarge1KB, e.cfg.seedsLargeScale})
	}
	for _, c := range cases {
		if err := e.seedsCase(ctx, c.preset, c.scale); err != nil {
			return err
		}
		e.stopServers()
	}
	return nil
}

// seedTool is one tool of the seeds benchmark: run copies src (a database
// URL through the counting proxy) into tgt (a database URL).
type seedTool struct {
	name string
	run  func(b record, src, tgt string) record
	// bound: a bound's script (not one of the peers the target compares
	// sofa with), run for the first copy only unless incremental is set
	bound bool
	// incremental: the bound also runs for the incremental copy, reading
	// the source's changes since the seq it had before the update
	incremental bool
}

func (e *env) seedsCase(ctx context.Context, preset string, scale float64) error {
	p, ok := dataset.Preset(preset, scale)
	if !ok {
		return fmt.Errorf("no preset %q", preset)
	}
	db := p.DB()
	src, err := e.startServer(ctx)
	if err != nil {
		return err
	}
	tgt, err := e.startServer(ctx)
	if err != nil {
		return err
	}
	if err := e.load(ctx, src.URL, []dataset.DB{db}, 1); err != nil {
		return err
	}
	px, err := startCountProxy(src.URL)
	if err != nil {
		return err
	}
	defer px.close()
	name := db.Name
	srcDB := src.URL + "/" + url.PathEscape(name)
	viaProxy := px.url + "/" + url.PathEscape(name)
	servers := []*server{src, tgt}
	// since is the source's update_seq just before the incremental's
	// update ("" for the first copy): where an incremental bound starts.
	since := ""
	tools := []seedTool{{name: "sofa", run: func(b record, s, t string) record {
		r, o := e.runTool(ctx, b, servers, e.sofa, "replicate", s, t, "--create-target", "--json")
		applySofa(&r, o)
		return r
	}}}
	if src.couch() {
		couchRep := func(label string, extra ...string) seedTool {
			return seedTool{name: label, run: func(b record, s, t string) record {
				name, args := e.node("couch-replicate.js", append([]string{s, t}, extra...)...)
				r, o := e.runTool(ctx, b, servers, name, args...)
				applyPeer(&r, o)
				return r
			}}
		}
		tools = append(tools, couchRep("couch-replicate"))
		for _, p := range e.cfg.couchRepSweep {
			tools = append(tools, couchRep("couch-replicate "+p.String(), strconv.Itoa(p[0]), strconv.Itoa(p[1])))
		}
	} else {
		tools = append(tools, seedTool{name: "pouchdb-replicate", run: func(b record, s, t string) record {
			name, args := e.node("pouchdb-replicate.js", s, t)
			r, o := e.runTool(ctx, b, servers, name, args...)
			applyPeer(&r, o)
			return r
		}})
	}
	if len(p.Atts) == 0 {
		// The bounds of the replicate benchmark, for a shape without
		// attachments (bound-copy reads them base64 in _bulk_get, which
		// bounds nothing for 2 MB attachments): ingest alone, and the
		// plainest pipelined copy.
		boundTool := func(script, prefix string, pr pair, incremental bool) seedTool {
			return seedTool{name: prefix + " " + pr.String(), bound: true, incremental: incremental, run: func(b record, s, t string) record {
				args := []string{s, t, strconv.Itoa(pr[0]), strconv.Itoa(pr[1])}
				if since != "" {
					args = append(args, "--since="+since)
				}
				name, args := e.node(script, args...)
				r, o := e.runTool(ctx, b, servers, name, args...)
				r.TimeMS = int64(applyPeer(&r, o).MS)
				return r
			}}
		}
		for _, pr := range e.cfg.boundSweep {
			tools = append(tools, boundTool("bound-bulkdocs.js", "bound-bulkdocs", pr, false))
		}
		for _, pr := range e.cfg.copyBound {
			// The copy bound also bounds the incremental copy: the
			// plainest copy of the changes since the update, into the
			// copy this bound made first.
			tools = append(tools, boundTool("bound-copy.js", "bound-copy", pr, true))
		}
	}
	if len(p.Atts) > 0 && src.couch() {
		// The ingest bound of a shape with attachments: the target alone
		// storing the documents from a local spool, as multipart PUTs
		// (bench/cmd/boundingest), at each parallelism of the sweep.
		for _, par := range e.cfg.attsIngestSweep {
			tools = append(tools, seedTool{name: fmt.Sprintf("bound-ingest-atts %d", par), bound: true, run: func(b record, s, t string) record {
				bin, err := e.buildTool(ctx, "boundingest")
				if err != nil {
					b.Error = err.Error()
					return b
				}
				r, o := e.runTool(ctx, b, servers, bin, "-parallel", strconv.Itoa(par), "-spool", filepath.Join(e.tmp, "spool-"+sanitize(name)), s, t)
				r.TimeMS = int64(applyPeer(&r, o).MS)
				return r
			}})
		}
	}
	base := record{Bench: "seeds", Case: fmt.Sprintf("%s, scale %g (%d docs)", preset, scale, p.Docs)}
	t := &table{title: "seeds: " + base.Case + ", " + kindName(src) + " -> " + kindName(tgt) + " (source read through a byte-counting proxy)",
		head: append([]string{"tool", "copy"}, append(usageHead, "from source", "verify")...)}
	times := map[string]map[string]int64{"first": {}, "incremental": {}}
	recs := map[string]record{} // "PHASE TOOL" -> a bound's record
	var updatedBytes int64
	for _, phase := range []string{"first", "incremental"} {
		if phase == "incremental" {
			var info struct {
				UpdateSeq json.RawMessage `json:"update_seq"`
			}
			if err := getJSON(ctx, srcDB, &info); err != nil {
				return fmt.Errorf("source seq before the update: %w", err)
			}
			since = seqString(info.UpdateSeq)
			n, b, err := updateTenth(ctx, srcDB)
			if err != nil {
				return fmt.Errorf("update 10%%: %w", err)
			}
			updatedBytes = b
			e.logf("seeds: %d documents got a new revision (%.1f MiB of bodies, attachments unchanged)", n, float64(b)/(1<<20))
		}
		for _, tl := range tools {
			if err := ctx.Err(); err != nil {
				return err
			}
			if tl.bound && phase != "first" && !tl.incremental {
				continue
			}
			b := base
			b.Tool, b.Case = tl.name, base.Case+", "+phase+" copy"
			tgtDB := tgt.URL + "/" + url.PathEscape("copy-"+sanitize(tl.name))
			before := px.bytes.Load()
			r := tl.run(b, viaProxy, tgtDB)
			moved := px.bytes.Load() - before
			r.Extra = map[string]any{"source_bytes": moved}
			if r.OK {
				r.Verify = e.oracle(ctx, srcDB, tgtDB, false, !tgt.couch())
				r.OK = r.Verify == "equal"
			}
			e.sink.write(r)
			e.logf("seeds: %s %s: %s in %s, %s from the source", phase, tl.name, status(r), secs(r.TimeMS), sizeText(moved))
			times[phase][tl.name] = okTime(r)
			if tl.bound && r.OK {
				recs[phase+" "+tl.name] = r
			}
			t.add(append(append([]string{tl.name, phase}, usageRow(r)...), sizeText(moved), firstNonEmpty(r.Verify, "-"))...)
		}
	}
	for _, phase := range []string{"first", "incremental"} {
		sofa := times[phase]["sofa"]
		var best int64
		bestName := ""
		var ingest, copyB int64
		copyName := ""
		for _, tl := range tools[1:] {
			v := times[phase][tl.name]
			switch {
			case v <= 0:
			case tl.bound && (strings.HasPrefix(tl.name, "bound-bulkdocs") || strings.HasPrefix(tl.name, "bound-ingest")):
				ingest = minPos(ingest, v)
			case tl.bound:
				if copyB == 0 || v < copyB {
					copyName = tl.name
				}
				copyB = minPos(copyB, v)
			case best == 0 || v < best:
				best, bestName = v, tl.name
			}
		}
		t.note("%s copy: %s/sofa = %s", phase, bestName, check(ratio(best, sofa), best, sofa, ">=", 3))
		switch {
		case ingest > 0 && copyB > 0:
			t.note("%s copy: sofa / copy bound = %s; 3x the best peer would be %s s, against the ingest bound %s s and the copy bound %s s (the best of each sweep, this run)%s",
				phase, ratio(sofa, copyB), secs(best/3), secs(ingest), secs(copyB), reach(best/3, ingest))
		case ingest > 0:
			t.note("%s copy: sofa / ingest bound = %s; 3x the best peer would be %s s, against the ingest bound %s s (the best of its sweep, this run; it reads nothing from the source)%s",
				phase, ratio(sofa, ingest), secs(best/3), secs(ingest), reach(best/3, ingest))
		case copyB > 0:
			t.note("%s copy: sofa / copy bound = %s; 3x the best peer would be %s s, against the copy bound %s s (the plainest copy of the same changes into its own first copy, this run)",
				phase, ratio(sofa, copyB), secs(best/3), secs(copyB))
		}
		if r, ok := recs[phase+" "+copyName]; ok && cpuFloor(r) > 0 {
			t.note("%s copy: the copy bound's requests cost the two servers %s CPU-s: %s s on the %d cores they share, against 3x the best peer %s s",
				phase, secs(r.ServerCPUMS), secs(cpuFloor(r)), runtime.NumCPU(), secs(best/3))
		}
	}
	t.note("the incremental copies follow 10%% of the documents getting a new revision with their attachments unchanged: %s of new bodies", sizeText(updatedBytes))
	t.note("the data set's attachments are loaded with new_edits=false and no revpos, which CouchDB stores as revpos 0: revpos cannot tell that the target holds them; sofa sends one as a stub when the target's ancestor holds the same digest (CouchDB's replicator stubs every attachment not newer than the ancestor)")
	t.print(os.Stdout)
	return nil
}

// seqString is a seq as the since parameter of `_changes` takes it: a
// JSON string's contents (CouchDB's opaque seq), or a number's digits
// (PouchDB Server).
func seqString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// minPos is the smaller of a and b, where 0 in a means none yet.
func minPos(a, b int64) int64 {
	if a == 0 || b < a {
		return b
	}
	return a
}

// sanitize keeps letters and digits of s (a database name part).
func sanitize(s string) string {
	var b []byte
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b = append(b, c)
		default:
			b = append(b, '-')
		}
	}
	return string(b)
}

// updateTenth gives every tenth document of the database at dbURL a new
// revision (a field added, attachments left as stubs, so unchanged) and
// returns how many it updated and the bytes of the bodies written.
func updateTenth(ctx context.Context, dbURL string) (int, int64, error) {
	var n int
	var total int64
	startKey := ""
	for {
		q := "/_all_docs?include_docs=true&limit=1000"
		if startKey != "" {
			k, _ := json.Marshal(startKey)
			q += "&skip=1&startkey=" + url.QueryEscape(string(k))
		}
		var page struct {
			Rows []struct {
				ID  string                     `json:"id"`
				Doc map[string]json.RawMessage `json:"doc"`
			} `json:"rows"`
		}
		if err := getJSON(ctx, dbURL+q, &page); err != nil {
			return n, total, err
		}
		if len(page.Rows) == 0 {
			return n, total, nil
		}
		var docs []map[string]json.RawMessage
		for i, row := range page.Rows {
			startKey = row.ID
			if i%10 != 0 || row.Doc == nil {
				continue
			}
			row.Doc["updated_for_bench"] = json.RawMessage("true")
			docs = append(docs, row.Doc)
		}
		if len(docs) > 0 {
			body, err := json.Marshal(map[string]any{"docs": docs})
			if err != nil {
				return n, total, err
			}
			req, err := newRequest(ctx, http.MethodPost, dbURL+"/_bulk_docs", body)
			if err != nil {
				return n, total, err
			}
			resp, err := httpClient.Do(req)
			if err != nil {
				return n, total, err
			}
			var res []struct {
				Error string `json:"error"`
			}
			derr := json.NewDecoder(resp.Body).Decode(&res)
			resp.Body.Close()
			if resp.StatusCode/100 != 2 || derr != nil {
				return n, total, fmt.Errorf("_bulk_docs: HTTP %d", resp.StatusCode)
			}
			for _, r := range res {
				if r.Error != "" {
					return n, total, fmt.Errorf("_bulk_docs: %s", r.Error)
				}
			}
			n += len(docs)
			total += int64(len(body))
		}
		if len(page.Rows) < 1000 {
			return n, total, nil
		}
	}
}

// countProxy is a loopback reverse proxy in front of one server that
// counts the answer bytes it passes on (credentials of the upstream URL
// are added to requests that carry none).
type countProxy struct {
	url   string // http://127.0.0.1:PORT with the upstream's userinfo
	bytes atomic.Int64
	srv   *http.Server
}

func startCountProxy(upstream string) (*countProxy, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	user := u.User
	u.User = nil
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countProxy{}
	pu := url.URL{Scheme: "http", Host: ln.Addr().String(), User: user}
	p.url = pu.String()
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = u.Host
			if pr.Out.Header.Get("Authorization") == "" && user != nil {
				pw, _ := user.Password()
				pr.Out.SetBasicAuth(user.Username(), pw)
			}
		},
		Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 128},
		ModifyResponse: func(resp *http.Response) error {
			resp.Body = &countingBody{ReadCloser: resp.Body, n: &p.bytes}
			return nil
		},
		FlushInterval: -1,
	}
	p.srv = &http.Server{Handler: rp}
	go p.srv.Serve(ln)
	return p, nil
}

func (p *countProxy) close() { _ = p.srv.Close() }

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countingBody) Read(b []byte) (int, error) {
	k, err := c.ReadCloser.Read(b)
	c.n.Add(int64(k))
	return k, err
}

// sizeText gives a byte count in KiB below 1 MiB, in MiB above.
func sizeText(b int64) string {
	if b < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// reach says whether a target time is below a bound's time: no copy can
// end sooner than its bound, so such a target is out of reach.
func reach(target, bound int64) string {
	if target > 0 && bound > target {
		return ": out of reach on this machine"
	}
	return ""
}
