package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sofadb/sofa/internal/dataset"
)

// backupCase is one data set of the backup benchmark.
type backupCase struct {
	name string
	dbs  func() ([]dataset.DB, error)
	// synthDocs is the document count of the synthetic cases (0 others),
	// for the flat-memory comparison.
	synthDocs int
	// attsIngest: the restore's ingest bound is bench/cmd/boundingest
	// (multipart PUTs; one leaf per document, as atts_db), not
	// bound-bulkdocs.js.
	attsIngest bool
}

// backupPeer is one way of backing up and restoring, database by database
// for the peers, whole server for sofa.
type backupPeer struct {
	name string
	note string
	ext  string // per-database file suffix of a peer's output
	// compressed: the output is already compressed (gzip size = size).
	compressed bool
	dump       func(e *env, src, out string, dbs []string) (string, []string)
	load       func(e *env, in, tgt string, dbs []string) (string, []string)
}

// benchBackup: backup and restore of 10k and 100k 1 KiB documents, the
// real-data set and atts_db: sofa vs couchbackup/couchrestore (through
// the shim PouchDB Server needs), pouchdb-replication-stream dump +
// pouchdb-load, and coucharchive's design.
func benchBackup(ctx context.Context, e *env) error {
	var cases []backupCase
	for _, n := range e.cfg.backupSizes {
		cases = append(cases, backupCase{
			name: fmt.Sprintf("%d docs x %d B", n, e.cfg.docSize), synthDocs: n,
			dbs: func() ([]dataset.DB, error) {
				return []dataset.DB{dataset.Synth{Name: "bench", Docs: n, MinSize: e.cfg.docSize, Seed: 1}.DB()}, nil
			},
		})
	}
	if s := e.cfg.backupRealScale; s > 0 {
		cases = append(cases, backupCase{name: fmt.Sprintf("real data, scale %g", s),
			dbs: func() ([]dataset.DB, error) { return dataset.Real(e.root+"/node_modules", dataset.Options{Scale: s}) }})
	}
	if s := e.cfg.attsScale; s > 0 {
		cases = append(cases, backupCase{name: fmt.Sprintf("atts_db, scale %g", s), attsIngest: true,
			dbs: func() ([]dataset.DB, error) {
				p, _ := dataset.Preset(dataset.PresetAtts, s)
				return []dataset.DB{p.DB()}, nil
			}})
	}
	sofaRSS := map[int][2]int64{} // synthetic docs -> backup, restore peak RSS
	for _, c := range cases {
		rss, err := e.backupCase(ctx, c)
		if err != nil {
			return err
		}
		if c.synthDocs > 0 {
			sofaRSS[c.synthDocs] = rss
		}
		e.stopServers()
	}
	if len(e.cfg.backupSizes) >= 2 {
		lo, hi := e.cfg.backupSizes[0], e.cfg.backupSizes[len(e.cfg.backupSizes)-1]
		a, b := sofaRSS[lo], sofaRSS[hi]
		fmt.Printf("\n  sofa peak RSS, %d vs %d docs: backup %s vs %s MiB (x%s), restore %s vs %s MiB (x%s); flat means x close to 1\n",
			lo, hi, mib(a[0]), mib(b[0]), ratio(b[0], a[0]), mib(a[1]), mib(b[1]), ratio(b[1], a[1]))
	}
	return nil
}

// backupPeers lists the peers; on CouchDB (couch) couchbackup and
// couchrestore talk to the server directly, with --attachments, as their
// users would; on PouchDB Server through couch-shim.js, without which they
// cannot run there.
func backupPeers(couch bool) []backupPeer {
	cb := backupPeer{name: "couchbackup", ext: ".json",
		note: "couchbackup full mode with attachments (experimental in couchbackup), couchrestore likewise; one process over every database, one after another",
		dump: func(e *env, src, out string, dbs []string) (string, []string) {
			return e.node("couchbackup-all.js", append([]string{src, out}, append(dbs, "--attachments")...)...)
		},
		load: func(e *env, in, tgt string, dbs []string) (string, []string) {
			return e.node("couchrestore-all.js", append([]string{in, tgt}, append(dbs, "--attachments")...)...)
		}}
	peers := backupPeersPouch()
	if couch {
		peers[1] = cb
	}
	return peers
}

func backupPeersPouch() []backupPeer {
	return []backupPeer{
		{name: "sofa", compressed: true,
			dump: func(e *env, src, out string, _ []string) (string, []string) {
				return e.sofa, []string{"backup", src, filepath.Join(out, "server.sofa"), "--json"}
			},
			load: func(e *env, in, tgt string, _ []string) (string, []string) {
				return e.sofa, []string{"restore", filepath.Join(in, "server.sofa"), tgt, "--json"}
			}},
		{name: "couchbackup+shim", ext: ".json",
			note: "couchbackup full mode via couch-shim.js; on PouchDB Server its rev-less _bulk_get returns winners only (conflicts lost); attachments are not backed up",
			dump: func(e *env, src, out string, dbs []string) (string, []string) {
				return e.perDB(dbs, func(db string) []string {
					return []string{"bench/couchbackup.js", dbURL(src, db), filepath.Join(out, db+".json"), "--shim"}
				})
			},
			load: func(e *env, in, tgt string, dbs []string) (string, []string) {
				return e.perDB(dbs, func(db string) []string {
					return []string{"bench/couchrestore.js", filepath.Join(in, db+".json"), dbURL(tgt, db), "--shim"}
				})
			}},
		{name: "replication-stream", ext: ".ndjson",
			note: "pouchdb-replication-stream dump + pouchdb-load; the dump is known to crash on attachments",
			dump: func(e *env, src, out string, dbs []string) (string, []string) {
				return e.perDB(dbs, func(db string) []string {
					return []string{"bench/replication-stream-dump.js", dbURL(src, db), filepath.Join(out, db+".ndjson")}
				})
			},
			load: func(e *env, in, tgt string, dbs []string) (string, []string) {
				return e.perDB(dbs, func(db string) []string {
					return []string{"bench/pouchdb-load.js", filepath.Join(in, db+".ndjson"), dbURL(tgt, db)}
				})
			}},
		{name: "coucharchive-design", ext: ".tar.gz", compressed: true,
			note: "PouchDB replication into a local LevelDB store, then tar.gz (coucharchive's design)",
			dump: func(e *env, src, out string, dbs []string) (string, []string) {
				return e.perDB(dbs, func(db string) []string {
					return []string{"bench/coucharchive-dump.js", dbURL(src, db), filepath.Join(out, db+".tar.gz")}
				})
			},
			load: func(e *env, in, tgt string, dbs []string) (string, []string) {
				return e.perDB(dbs, func(db string) []string {
					return []string{"bench/coucharchive-restore.js", filepath.Join(in, db+".tar.gz"), dbURL(tgt, db)}
				})
			}},
	}
}

// backupCase runs every peer's backup and restore on one data set and
// returns sofa's peak RSS (KiB) of backup and restore.
func (e *env) backupCase(ctx context.Context, c backupCase) ([2]int64, error) {
	var sofaRSS [2]int64
	src, err := e.startServer(ctx)
	if err != nil {
		return sofaRSS, err
	}
	dbs, err := c.dbs()
	if err != nil {
		return sofaRSS, err
	}
	if err := e.load(ctx, src.URL, dbs, 4); err != nil {
		return sofaRSS, err
	}
	names, err := userDBs(ctx, src.URL)
	if err != nil {
		return sofaRSS, err
	}
	caseName := fmt.Sprintf("%s (%d dbs)", c.name, len(names))
	t := &table{title: "backup: " + caseName,
		head: []string{"tool", "backup", "time s", "cpu s", "rss MiB", "size MiB", "gzip MiB", "restore", "time s", "cpu s", "rss MiB", "verify"}}
	var peers []backupPeer
	for _, p := range backupPeers(src.couch()) {
		if p.name == "sofa" || e.cfg.wants(p.name) {
			peers = append(peers, p)
		}
		if p.name == "sofa" {
			peers = append(peers, sofaBackupVariants(e.cfg.sofaVariants)...)
			if e.cfg.sofaAlt != "" {
				peers = append(peers, sofaAltBackup(e.cfg.sofaAlt))
			}
		}
	}
	// Every tool and bound once per run, interleaved: with several runs
	// each figure is the median of its runs (the ingest bound: the best
	// setting's median), so neither side gets the luck of a single run.
	runs := max(e.cfg.backupRuns, 1)
	dumps, loads := map[string][]record{}, map[string][]record{}
	var bounds []record
	ingestRuns := map[string][]record{}
	var ingestOrder []string
	for run := 1; run <= runs; run++ {
		for _, p := range runOrder(peers, run) {
			if err := ctx.Err(); err != nil {
				return sofaRSS, err
			}
			dump, load, err := e.backupRoundTrip(ctx, src, caseName, names, p, run)
			if err != nil {
				return sofaRSS, err
			}
			dumps[p.name] = append(dumps[p.name], dump)
			loads[p.name] = append(loads[p.name], load)
		}
		// The read bound: every revision read from the source as plainly
		// as possible and thrown away (bench/cmd/boundread).
		if e.cfg.wants("bound-read") {
			bounds = append(bounds, e.backupReadBound(ctx, src, caseName, names, run))
		}
		// The ingest bound of the restore: the target storing every
		// revision, prepared beforehand, in its cheapest form.
		if e.cfg.wants("bound-ingest") {
			for _, r := range e.restoreIngestBound(ctx, src, caseName, names, c.attsIngest, run) {
				if _, ok := ingestRuns[r.Tool]; !ok {
					ingestOrder = append(ingestOrder, r.Tool)
				}
				ingestRuns[r.Tool] = append(ingestRuns[r.Tool], r)
			}
		}
	}
	if runs > 1 {
		t.title += fmt.Sprintf(" (median of %d interleaved runs)", runs)
	}
	type pair struct{ dump, load record }
	results := map[string]pair{}
	for _, p := range peers {
		pr := pair{summary(e, dumps[p.name]), summary(e, loads[p.name])}
		dump, load := pr.dump, pr.load
		results[p.name] = pr
		if p.name == "sofa" {
			sofaRSS = [2]int64{dump.MaxRSSKB, load.MaxRSSKB}
		}
		rs := []string{"-", "-", "-", "-"}
		if load.Error != "not run: backup failed" {
			rs = []string{status(load), secs(load.TimeMS), secs(load.CPUMS), mib(load.MaxRSSKB)}
		}
		t.add(append(append([]string{p.name, status(dump), secs(dump.TimeMS), secs(dump.CPUMS), mib(dump.MaxRSSKB),
			mibBytes(dump.ArchiveBytes), mibBytes(dump.GzipBytes)}, rs...), shortVerify(load))...)
	}
	var bound record
	if len(bounds) > 0 {
		bound = summary(e, bounds)
		t.add("bound-read", status(bound), secs(bound.TimeMS), secs(bound.CPUMS), mib(bound.MaxRSSKB), "-", "-", "-", "-", "-", "-", "-")
	}
	var ingest record
	if e.cfg.wants("bound-ingest") {
		ingest = bestIngest(e, caseName, ingestOrder, ingestRuns)
		t.add("bound-ingest", "-", "-", "-", "-", "-", "-", status(ingest), secs(ingest.TimeMS), "-", "-", "-")
	}
	// Ratios against the fastest peer whose backup finished, and the
	// fastest whose round trip restored an equal copy.
	s := results["sofa"]
	for _, phase := range []string{"backup", "restore"} {
		get := func(p pair) record {
			if phase == "backup" {
				return p.dump
			}
			return p.load
		}
		var fin, lossless record
		for _, p := range peers[1:] {
			if isSofa(p.name) {
				continue
			}
			r := get(results[p.name])
			ok := r.Error == "" && r.TimeMS > 0 && (phase == "backup" && r.OK || phase == "restore" && r.Exit == 0)
			if ok && (fin.TimeMS == 0 || r.TimeMS < fin.TimeMS) {
				fin = r
			}
			if results[p.name].load.OK && (lossless.TimeMS == 0 || r.TimeMS < lossless.TimeMS) {
				lossless = r
			}
		}
		st := okTime(get(s))
		t.note("%s: fastest peer that finished (%s) / sofa = %s", phase, firstNonEmpty(fin.Tool, "none"), check(ratio(fin.TimeMS, st), fin.TimeMS, st, ">=", 2))
		t.note("%s: fastest peer whose restore verified equal (%s) / sofa = %s", phase, firstNonEmpty(lossless.Tool, "none"), check(ratio(lossless.TimeMS, st), lossless.TimeMS, st, ">=", 2))
		if phase == "backup" && okTime(bound) > 0 {
			b := okTime(bound)
			t.note("backup: sofa / read bound = %s; fastest peer (%s) / read bound = %s: where that is below 2, no backup can be 2x the fastest peer here without reading the source faster than the bound",
				ratio(st, b), firstNonEmpty(fin.Tool, "none"), ratio(fin.TimeMS, b))
			e.noteSizeSpeedBound(t, dumps, bound, fin)
		}
		if phase == "restore" && okTime(ingest) > 0 {
			b := okTime(ingest)
			t.note("restore: sofa / ingest bound (%s) = %s; fastest peer (%s) / ingest bound = %s",
				ingest.Extra["best"], check(ratio(st, b), st, b, "<=", 1.15), firstNonEmpty(fin.Tool, "none"), ratio(fin.TimeMS, b))
		}
	}
	for _, p := range peers[1:] {
		d := results[p.name].dump
		if !isSofa(p.name) && d.OK && d.GzipBytes > 0 && s.dump.ArchiveBytes > 0 {
			lossy := ""
			if !results[p.name].load.OK {
				lossy = " (its output did not restore to an equal copy: not comparable)"
			}
			t.note("archive size: sofa / %s gzipped = %s%s", p.name, ratio(s.dump.ArchiveBytes, d.GzipBytes), lossy)
		}
	}
	noteArchiveLayout(t, dumps)
	var work []string
	for _, p := range peers {
		if d := results[p.name].dump; d.ServerReductions > 0 {
			work = append(work, fmt.Sprintf("%s %.0f", p.name, float64(d.ServerReductions)/1e6))
		}
	}
	if bound.ServerReductions > 0 {
		work = append(work, fmt.Sprintf("bound-read %.0f", float64(bound.ServerReductions)/1e6))
	}
	if len(work) > 0 {
		t.note("backup: the source's work in millions of Erlang reductions (load-independent): %s", strings.Join(work, ", "))
	}
	for _, p := range peers[1:] {
		if pr := results[p.name]; !pr.dump.OK {
			t.note("%s: backup failed: %s", p.name, pr.dump.Error)
		} else if !pr.load.OK {
			t.note("%s: restore: %s", p.name, firstNonEmpty(pr.load.Error, pr.load.Verify))
		}
	}
	t.note("on CouchDB couchbackup and couchrestore run in one process over every database; the other peers database by database (one process each, in sequence); sofa backs up and restores the whole server; verify = the test oracle (internal/couchtest.CompareDBs: ids, leaves, bodies, attachments) of every database of source and restored server")
	t.print(os.Stdout)
	return sofaRSS, nil
}

// backupRoundTrip runs one peer's backup of names on src and, when it
// finished, its restore into a fresh target, checked by the test oracle;
// both records are written with Run set to run.
func (e *env) backupRoundTrip(ctx context.Context, src *server, caseName string, names []string, p backupPeer, run int) (record, record, error) {
	out, err := os.MkdirTemp(e.tmp, "backup-")
	if err != nil {
		return record{}, record{}, err
	}
	defer os.RemoveAll(out)
	b := record{Bench: "backup", Case: caseName, Tool: p.name + " backup", Note: p.note, Run: run}
	name, args := p.dump(e, src.URL, out, names)
	dump, o := e.runTool(ctx, b, []*server{src}, name, args...)
	e.applyBackupOutput(&dump, o, p, out, names)
	if run == 1 && dump.OK && strings.HasPrefix(p.name, "couchbackup") {
		// What compressing this output to its gzipped size costs at
		// best: the CPU any backup meeting the size target spends.
		var files []string
		for _, db := range names {
			files = append(files, filepath.Join(out, db+p.ext))
		}
		best, tries, ok, err := compressionBound(files, dump.GzipBytes)
		if dump.Extra == nil {
			dump.Extra = map[string]any{}
		}
		switch {
		case err != nil:
			dump.Extra["compression_bound_error"] = err.Error()
		case ok:
			dump.Extra["compression_bound"] = best
		}
		dump.Extra["compression_tries"] = tries
	}
	e.sink.write(dump)
	e.logf("backup: %s: run %d %s backup %s in %s", caseName, run, p.name, status(dump), secs(dump.TimeMS))

	load := record{Bench: "backup", Case: caseName, Tool: p.name + " restore", Note: p.note, Run: run, Error: "not run: backup failed"}
	if dump.OK {
		tgt, err := e.startServer(ctx)
		if err != nil {
			return dump, load, err
		}
		b.Tool = p.name + " restore"
		name, args := p.load(e, out, tgt.URL, names)
		var o *outcome
		load, o = e.runTool(ctx, b, []*server{tgt}, name, args...)
		if isSofa(p.name) {
			applySofa(&load, o)
		} else {
			applyPeers(&load, o, len(names))
		}
		load.Verify = e.oracle(ctx, src.URL, tgt.URL, true, !tgt.couch())
		if load.Verify != "equal" {
			load.OK = false
		}
		e.stopServer(tgt)
		e.logf("backup: %s: run %d %s restore %s in %s (%s)", caseName, run, p.name, status(load), secs(load.TimeMS), load.Verify)
	}
	e.sink.write(load)
	return dump, load, nil
}

// runOrder is the order the tools run in run run (from 1): as listed in
// odd runs, reversed in even ones. The first tool after a case's load or
// after the bounds ran slower on in-memory PouchDB Server (by up to a
// third, whichever build it was), so no tool keeps that place.
func runOrder[T any](tools []T, run int) []T {
	if run%2 == 1 {
		return tools
	}
	r := slices.Clone(tools)
	slices.Reverse(r)
	return r
}

// summary is the one record a table row shows for runs of one tool: the
// run itself when there was one, else their median (written to the
// results file as such). A restore whose backup failed in every run keeps
// its "not run" error.
func summary(e *env, runs []record) record {
	if len(runs) == 1 {
		return runs[0]
	}
	m := median(runs)
	if allNotRun := slices.IndexFunc(runs, func(r record) bool { return r.Error != "not run: backup failed" }) < 0; allNotRun {
		m.Error = "not run: backup failed"
	}
	e.sink.write(m)
	return m
}

// applyBackupOutput fills a backup record from the tool's output lines
// and the files it wrote under out.
func (e *env) applyBackupOutput(r *record, o *outcome, p backupPeer, out string, dbs []string) {
	if isSofa(p.name) {
		applySofa(r, o)
		r.ArchiveBytes = fileSize(filepath.Join(out, "server.sofa"))
		r.GzipBytes = r.ArchiveBytes
		if contents, catalog, framing, err := archiveLayout(filepath.Join(out, "server.sofa")); err == nil && r.OK {
			r.Extra = map[string]any{"archive_contents_bytes": contents, "archive_catalog_bytes": catalog, "archive_framing_bytes": framing}
		}
		return
	}
	applyPeers(r, o, len(dbs))
	for _, db := range dbs {
		path := filepath.Join(out, db+p.ext)
		r.ArchiveBytes += fileSize(path)
		if p.compressed {
			continue
		}
		if g, err := gzipSize(path); err == nil {
			r.GzipBytes += g
		}
	}
	if p.compressed {
		r.GzipBytes = r.ArchiveBytes
	}
}

// applyPeers reads the result lines of a per-database peer run (one line
// per database): docs summed, OK only if every database reported ok.
func applyPeers(r *record, o *outcome, want int) {
	n, failed := 0, 0
	var firstErr string
	for _, line := range strings.Split(string(o.Stdout), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue
		}
		one := &outcome{Stdout: []byte(line)}
		var p peerResult
		if one.lastJSON(&p) != nil {
			continue
		}
		n++
		r.Docs += p.Docs
		if p.OK != nil && !*p.OK {
			failed++
			if firstErr == "" {
				firstErr = p.Error
			}
		}
	}
	if failed > 0 || n < want {
		r.OK = false
		r.Error = fmt.Sprintf("%d of %d databases failed or gave no result; first error: %s", want-n+failed, want, firstNonEmpty(firstErr, r.Error))
	}
}

// perDB writes a shell script that runs node SCRIPT ARGS... once per
// database, in sequence, going on after a failure and exiting 1 if any
// failed; it returns the command line that runs it.
func (e *env) perDB(dbs []string, args func(db string) []string) (string, []string) {
	var b strings.Builder
	b.WriteString("rc=0\n")
	for _, db := range dbs {
		b.WriteString("node")
		for _, a := range args(db) {
			b.WriteString(" " + shellQuote(a))
		}
		b.WriteString(" || rc=1\n")
	}
	b.WriteString("exit $rc\n")
	f, err := os.CreateTemp(e.tmp, "perdb-*.sh")
	if err == nil {
		_, err = f.WriteString(b.String())
		f.Close()
	}
	if err != nil {
		return "false", nil
	}
	return "bash", []string{f.Name()}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func dbURL(server, db string) string { return server + "/" + url.PathEscape(db) }

func shortVerify(r record) string {
	if r.Verify == "" {
		return "-"
	}
	if len(r.Verify) > 70 {
		return r.Verify[:70] + "..."
	}
	return r.Verify
}

// sofaBackupVariants are extra sofa runs of the backup benchmark, one per
// -sofa-variants argument set added to both the backup's and the
// restore's arguments; they are not peers.
func sofaBackupVariants(variants string) []backupPeer {
	var out []backupPeer
	for _, v := range strings.Split(variants, ";") {
		extra := strings.Fields(v)
		if len(extra) == 0 {
			continue
		}
		base := backupPeersPouch()[0]
		dump, load := base.dump, base.load
		out = append(out, backupPeer{name: "sofa " + strings.Join(extra, " "), compressed: true,
			dump: func(e *env, src, out string, dbs []string) (string, []string) {
				name, args := dump(e, src, out, dbs)
				return name, append(args, extra...)
			},
			load: func(e *env, in, tgt string, dbs []string) (string, []string) {
				name, args := load(e, in, tgt, dbs)
				return name, append(args, extra...)
			}})
	}
	return out
}

// sofaAltBackup is another sofa binary (-sofa-alt, e.g. an earlier
// build) backing up and restoring beside sofa; not a peer.
func sofaAltBackup(bin string) backupPeer {
	base := backupPeersPouch()[0]
	swap := func(f func(e *env, a, b string, dbs []string) (string, []string)) func(e *env, a, b string, dbs []string) (string, []string) {
		return func(e *env, a, b string, dbs []string) (string, []string) {
			_, args := f(e, a, b, dbs)
			return bin, args
		}
	}
	return backupPeer{name: "sofa-alt", note: "sofa binary " + bin, compressed: true, dump: swap(base.dump), load: swap(base.load)}
}

// isSofa: the tool is sofa, one of its variants or sofa-alt.
func isSofa(name string) bool {
	return name == "sofa" || name == "sofa-alt" || strings.HasPrefix(name, "sofa ")
}
