package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// config holds every size and setting of the benchmarks.
type config struct {
	root, sofa, measure, tmp, out string
	smoke, verbose                bool
	// server is the kind of every server started (kindPouchDB,
	// kindCouchDB); serverURL names running CouchDB servers instead.
	server, serverURL string

	// replicate
	runs       int     // runs per tool, interleaved; the median is reported
	docs       int     // documents of the 1-database copy
	docSize    int     // body bytes per document
	realScale  float64 // --scale of the real-data set
	skipReal   bool
	realPouchP int // pool of pool-replicate.js on the real set
	// couchRepSweep: worker_processes/http_connections settings of
	// CouchDB's replicator tried besides its defaults.
	couchRepSweep pairList
	// boundSweep: batch/parallel settings of the ingest bound; the best
	// is the bound.
	boundSweep pairList
	// sofaVariants: extra sofa runs, each with these arguments added
	// (e.g. "--workers=8"), to measure a setting against the default.
	sofaVariants string
	// sofaAlt: another sofa binary run beside -sofa in the same run
	// (e.g. an earlier build), to compare two versions within one run.
	sofaAlt string
	// pouchBatches: batch_size values of PouchDB's replicator tried
	// besides its default.
	pouchBatches intList
	// copyBound: batch/parallel of the copy bound.
	copyBound pairList
	// attsIngestSweep: PUTs in flight of the seeds' ingest bound with
	// attachments (bench/cmd/boundingest); the best counts.
	attsIngestSweep intList
	// tools, when set, restricts the replicate and backup benchmarks to
	// the tools named (see wants): a sweep of sofa's settings need not
	// run every peer each round.
	tools string

	// latency
	latency     time.Duration
	latencyRuns int

	// fleet
	fleetDBs    int // databases of one small document
	fleetBigDBs int // databases of fleetBigDocs documents
	fleetBigDoc int
	fleetRuns   int // runs of every fleet tool and bound, interleaved
	pool        int // pool of pool-replicate.js
	rateProbe   time.Duration

	// controller
	ctlK     int
	ctlDBs   int
	ctlDocs  int
	ctlSweep intList
	// ctlCases names the overload cases; ctlMaxDBsOpen is CouchDB's
	// max_dbs_open in the max-dbs-open case.
	ctlCases      string
	ctlMaxDBsOpen int

	// seeds
	seedsAttsScale, seedsLargeScale float64

	// lag: steady writer rates (writes/s), seconds per rate, concurrent
	// writer clients, burst size (one _bulk_docs), idle span, the lower
	// sofa --flush-interval, databases of the whole-server case (0 skips)
	// and its total write rate.
	lagRates     intList
	lagPhase     time.Duration
	lagWriters   int
	lagBurst     int
	lagIdle      time.Duration
	lagFlush     time.Duration
	lagDBs       int
	lagFleetRate int
	lagOne       bool
	// soak: databases, writes/s, duration, sampling interval.
	soakDBs, soakRate        int
	soakDuration, soakSample time.Duration
	soakFaults               time.Duration

	// backup
	backupSizes     intList
	backupRealScale float64
	backupRuns      int // backup: runs per tool and bound, interleaved; medians reported
	attsScale       float64
	timeout         time.Duration

	// s3
	s3MiB       int
	s3BPS       int64
	s3Latency   time.Duration
	s3Transfers intList
	s3PartSize  int
	s3Restore   bool
	s3put       string
}

// s3FullMiB is the size for the s3 benchmark (about 1 GiB); a
// run below it is labelled REDUCED SIZE in its table and records.
const s3FullMiB = 1024

func defaultConfig() *config {
	return &config{
		root: ".", sofa: "bin/sofa", out: "bench/results/bench.jsonl", server: kindPouchDB,
		runs: 3, docs: 10000, docSize: 1024, realScale: 0.1, realPouchP: 1,
		couchRepSweep:   pairList{{8, 40}, {16, 80}},
		boundSweep:      pairList{{500, 4}, {1000, 4}, {500, 8}},
		copyBound:       pairList{{500, 4}},
		attsIngestSweep: intList{4, 8, 16},
		pouchBatches:    intList{500},
		latency:         50 * time.Millisecond, latencyRuns: 1,
		fleetDBs: 1000, fleetBigDBs: 1000, fleetBigDoc: 100, pool: 64, rateProbe: 3 * time.Second,
		ctlK: 12, ctlDBs: 200, ctlDocs: 100, ctlSweep: intList{4, 8, 12, 16, 32, 64},
		ctlCases: "429,dbs-active,max-dbs-open", ctlMaxDBsOpen: 20,
		seedsAttsScale: 10, seedsLargeScale: 1,
		backupSizes: intList{10000, 100000}, backupRealScale: 0.1, attsScale: 1,
		timeout: 20 * time.Minute,
		s3MiB:   1024, s3BPS: 8_000_000, s3Latency: 20 * time.Millisecond, s3Transfers: intList{1, 2, 4, 8}, s3PartSize: 16 << 20, s3Restore: true,
		lagRates: intList{100, 1000}, lagPhase: 10 * time.Second, lagWriters: 32, lagBurst: 10000,
		lagIdle: 5 * time.Second, lagFlush: 50 * time.Millisecond, lagDBs: 1000, lagFleetRate: 100, lagOne: true,
		soakDBs: 20, soakRate: 50, soakDuration: 20 * time.Minute, soakSample: time.Minute,
	}
}

func (c *config) register(fs *flag.FlagSet) {
	fs.StringVar(&c.root, "root", c.root, "repository root (holds node_modules and bench/)")
	fs.StringVar(&c.sofa, "sofa", c.sofa, "sofa binary")
	fs.StringVar(&c.measure, "measure", "", "bench/cmd/measure binary (default: built into the scratch directory)")
	fs.StringVar(&c.tmp, "tmp", "", "scratch directory parent (default: the system temp dir)")
	fs.StringVar(&c.out, "out", c.out, "append result records (JSON lines) to this file")
	fs.BoolVar(&c.smoke, "smoke", false, "tiny sizes everywhere: checks the harness, numbers mean nothing")
	fs.BoolVar(&c.verbose, "v", false, "print every command")
	fs.StringVar(&c.server, "server", c.server, "kind of the servers started for the benchmarks: pouchdb (in-memory PouchDB Server) or couchdb (CouchDB from the release, as internal/couchtest finds it)")
	fs.StringVar(&c.serverURL, "server-url", "", "run on these running CouchDB servers (comma-separated http://ADMIN:PW@HOST:PORT, at least two: source and target) instead of starting any; EVERY DATABASE ON THEM IS DELETED")
	fs.Var(&c.couchRepSweep, "couch-rep-sweep", "replicate: CouchDB's replicator settings tried besides its defaults, worker_processes/http_connections comma-separated (e.g. 8/40,16/80)")
	fs.StringVar(&c.sofaVariants, "sofa-variants", "", "replicate, backup, fleet: extra sofa runs, ';'-separated argument sets added to sofa's (e.g. \"--workers=8;--workers=16\"; in backup to both the backup and the restore)")
	fs.StringVar(&c.sofaAlt, "sofa-alt", "", "replicate, backup, fleet: another sofa binary run as tool \"sofa-alt\" beside -sofa (e.g. an earlier build)")
	fs.Var(&c.pouchBatches, "pouch-batches", "replicate: PouchDB replicator batch_size values tried besides its default (comma-separated)")
	fs.Var(&c.boundSweep, "bound-sweep", "replicate, seeds, backup (its restore): ingest bound settings, batch/parallel comma-separated; the best is the bound")
	fs.Var(&c.copyBound, "copy-bound", "replicate: copy bound settings, batch/parallel comma-separated; the best is the bound")
	fs.StringVar(&c.tools, "tools", "", "replicate, backup, fleet: run only these tools, comma-separated names; a name ending in * names every tool it begins (e.g. \"sofa*,couch-replicate\"); empty: all")
	fs.IntVar(&c.runs, "runs", c.runs, "replicate: runs per tool, interleaved (median reported)")
	fs.IntVar(&c.docs, "docs", c.docs, "replicate, latency: documents in the database (replicate: 0 skips the one-database case)")
	fs.IntVar(&c.docSize, "doc-size", c.docSize, "body bytes per synthetic document")
	fs.Float64Var(&c.realScale, "real-scale", c.realScale, "replicate: --scale of the real-data set")
	fs.BoolVar(&c.skipReal, "skip-real", false, "replicate: skip the real-data set")
	fs.IntVar(&c.realPouchP, "real-pool", c.realPouchP, "replicate: databases PouchDB's replicator copies at once on the real set")
	fs.DurationVar(&c.latency, "latency", c.latency, "latency: delay the proxy adds to every request")
	fs.IntVar(&c.latencyRuns, "latency-runs", c.latencyRuns, "latency: runs per tool")
	fs.IntVar(&c.fleetDBs, "fleet-dbs", c.fleetDBs, "fleet: databases of one small document")
	fs.IntVar(&c.fleetBigDBs, "fleet-big-dbs", c.fleetBigDBs, "fleet: databases of -fleet-big-docs documents (0 skips)")
	fs.IntVar(&c.fleetBigDoc, "fleet-big-docs", c.fleetBigDoc, "fleet: documents per database of the second case")
	fs.IntVar(&c.fleetRuns, "fleet-runs", 1, "fleet: runs of every tool and bound per case, the tools' order reversed every other run; medians of the times and of each run's ratios are printed")
	fs.IntVar(&c.pool, "pool", c.pool, "fleet: databases the baseline replicates at once")
	fs.DurationVar(&c.rateProbe, "rate-probe", c.rateProbe, "fleet: how long to measure the server's request rate")
	fs.IntVar(&c.ctlK, "ctl-k", c.ctlK, "controller: the proxy's in-flight cap (unknown to sofa)")
	fs.IntVar(&c.ctlDBs, "ctl-dbs", c.ctlDBs, "controller: databases copied per run")
	fs.IntVar(&c.ctlDocs, "ctl-docs", c.ctlDocs, "controller: documents per database")
	fs.StringVar(&c.ctlCases, "ctl-cases", c.ctlCases, "controller: comma-separated overload cases: 429 and dbs-active (the proxy answers 429, or CouchDB's 500 all_dbs_active, above -ctl-k in flight), max-dbs-open (CouchDB only: both servers run with max_dbs_open = -ctl-max-dbs-open)")
	fs.IntVar(&c.ctlMaxDBsOpen, "ctl-max-dbs-open", c.ctlMaxDBsOpen, "controller: CouchDB's max_dbs_open in the max-dbs-open case")
	fs.Var(&c.attsIngestSweep, "seeds-atts-ingest", "seeds, backup (atts_db's restore): comma-separated PUTs in flight of atts_db's ingest bound (bench/cmd/boundingest)")
	fs.Var(&c.ctlSweep, "ctl-sweep", "controller: comma-separated --max-requests values of the fixed sweep")
	fs.Float64Var(&c.seedsAttsScale, "seeds-atts-scale", c.seedsAttsScale, "seeds: scale of atts_db (10: 1,100 docs, the benchmark's size; 0 skips)")
	fs.Float64Var(&c.seedsLargeScale, "seeds-large-scale", c.seedsLargeScale, "seeds: scale of large1kb (1: 341,298 docs; 0 skips)")
	fs.Var(&c.backupSizes, "backup-sizes", "backup: comma-separated document counts of the synthetic cases")
	fs.IntVar(&c.backupRuns, "backup-runs", 1, "backup: runs of every tool (backup and restore) and bound, interleaved; each figure is the median of its runs (the ingest bound: its best setting's median)")
	fs.Float64Var(&c.backupRealScale, "backup-real-scale", c.backupRealScale, "backup: --scale of the real-data case (0 skips)")
	fs.Float64Var(&c.attsScale, "atts-scale", c.attsScale, "backup: --scale of atts_db (0 skips)")
	fs.IntVar(&c.s3MiB, "s3-mib", c.s3MiB, "s3: MiB of documents with attachments in the source (atts_db's shape, about 2 MiB each)")
	fs.Int64Var(&c.s3BPS, "s3-bps", c.s3BPS, "s3: the proxy's cap on each connection, bytes per second in each direction")
	fs.DurationVar(&c.s3Latency, "s3-latency", c.s3Latency, "s3: delay the proxy adds to every request")
	fs.Var(&c.s3Transfers, "s3-transfers", "s3: comma-separated --transfers values, ascending (the first is the ratios' base)")
	fs.IntVar(&c.s3PartSize, "s3-part-size", c.s3PartSize, "s3: --part-size in bytes, also the peers' chunk size in their tuned runs")
	fs.StringVar(&c.s3put, "s3put", "", "s3: bench/cmd/s3put binary, sofa's uploader alone (default: built into the scratch directory)")
	fs.BoolVar(&c.s3Restore, "s3-restore", c.s3Restore, "s3: also restore into fresh servers (bounded by the target's ingest; false: only the read path, sofa verify)")
	fs.Var(&c.lagRates, "lag-rates", "lag: comma-separated steady writer rates (writes/s)")
	fs.DurationVar(&c.lagPhase, "lag-phase", c.lagPhase, "lag: duration of each steady phase")
	fs.IntVar(&c.lagWriters, "lag-writers", c.lagWriters, "lag: concurrent writer clients (enough to sustain the highest rate)")
	fs.IntVar(&c.lagBurst, "lag-burst", c.lagBurst, "lag: documents of the burst (one _bulk_docs; 0 skips)")
	fs.DurationVar(&c.lagIdle, "lag-idle", c.lagIdle, "lag: span with no writes over which idle CPU is measured")
	fs.DurationVar(&c.lagFlush, "lag-flush", c.lagFlush, "lag: the lower sofa --flush-interval measured besides the default")
	fs.IntVar(&c.lagDBs, "lag-dbs", c.lagDBs, "lag: databases of the whole-server case (0 skips)")
	fs.IntVar(&c.lagFleetRate, "lag-fleet-rate", c.lagFleetRate, "lag: writes/s spread over the databases of the whole-server case")
	fs.BoolVar(&c.lagOne, "lag-one", c.lagOne, "lag: run the one-database cases (false: the whole-server case only)")
	fs.IntVar(&c.soakDBs, "soak-dbs", c.soakDBs, "soak: databases of the whole-server run (one more is followed by a one-database run)")
	fs.IntVar(&c.soakRate, "soak-rate", c.soakRate, "soak: writes/s spread over every database")
	fs.DurationVar(&c.soakDuration, "soak-duration", c.soakDuration, "soak: how long the writes go on")
	fs.DurationVar(&c.soakSample, "soak-sample", c.soakSample, "soak: time between two samples of each sofa's RSS and Go heap")
	fs.DurationVar(&c.soakFaults, "soak-faults", 0, "soak: the fault cycle (3 minutes of faults through proxies: target 503s, resets, target unreachable; then none for the rest); 0: no proxies, no faults")
	fs.DurationVar(&c.timeout, "timeout", c.timeout, "kill any one tool run after this long")
}

// shrink sets the -smoke sizes.
func (c *config) shrink() {
	c.runs, c.docs, c.realScale, c.latencyRuns = 1, 500, 0.02, 1
	c.fleetDBs, c.fleetBigDBs, c.fleetBigDoc, c.rateProbe = 30, 10, 20, time.Second
	c.ctlDBs, c.ctlDocs, c.ctlSweep = 20, 20, intList{4, 32}
	c.backupSizes, c.backupRealScale, c.attsScale = intList{500, 2000}, 0.02, 0.1
	c.couchRepSweep, c.boundSweep = pairList{{8, 40}}, pairList{{500, 4}}
	c.seedsAttsScale, c.seedsLargeScale = 0.1, 0.005
	c.attsIngestSweep = intList{4}
	c.s3MiB, c.s3Transfers, c.s3PartSize = 48, intList{1, 4}, 5<<20
	c.lagPhase, c.lagBurst, c.lagIdle, c.lagDBs = 2*time.Second, 500, time.Second, 20
	c.soakDBs, c.soakRate, c.soakDuration, c.soakSample = 3, 10, 20*time.Second, 5*time.Second
}

// pair is one a/b setting of a sweep.
type pair [2]int

func (p pair) String() string { return fmt.Sprintf("%d/%d", p[0], p[1]) }

// pairList is a comma-separated list flag of a/b pairs of positive
// integers.
type pairList []pair

func (l *pairList) String() string {
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = v.String()
	}
	return strings.Join(s, ",")
}

func (l *pairList) Set(v string) error {
	var out pairList
	for _, f := range strings.Split(v, ",") {
		a, b, ok := strings.Cut(strings.TrimSpace(f), "/")
		x, err1 := strconv.Atoi(a)
		y, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || x <= 0 || y <= 0 {
			return fmt.Errorf("%q is not A/B with positive integers", f)
		}
		out = append(out, pair{x, y})
	}
	*l = out
	return nil
}

// intList is a comma-separated list flag of positive integers.
type intList []int

func (l *intList) String() string {
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	var out intList
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// wants reports whether the tool named name runs (the -tools filter).
func (c *config) wants(name string) bool {
	if c.tools == "" {
		return true
	}
	for _, t := range strings.Split(c.tools, ",") {
		t = strings.TrimSpace(t)
		if t == name || strings.HasSuffix(t, "*") && strings.HasPrefix(name, strings.TrimSuffix(t, "*")) {
			return true
		}
	}
	return false
}
