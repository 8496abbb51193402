package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/replicate"
)

// engineFlags are the tuning options of the one-database engine.
type engineFlags struct {
	workers         int
	batchSize       int
	fetchBatch      int
	writeDocs       int
	writeBytes      int64
	maxInflight     int64
	checkpointEvery time.Duration
	noCheckpoints   bool
	streamThreshold int64
}

func (f *engineFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.workers, "workers", replicate.DefaultWorkers, "batches in flight at once per database")
	fs.IntVar(&f.batchSize, "batch-size", replicate.DefaultBatchSize, "changes rows per batch (one _revs_diff each)")
	fs.IntVar(&f.fetchBatch, "fetch-batch", replicate.DefaultFetchBatch, "most revisions per _bulk_get request")
	fs.IntVar(&f.writeDocs, "write-batch-docs", replicate.DefaultWriteBatchDocs, "flush the write buffer at this many revisions")
	fs.Int64Var(&f.writeBytes, "write-batch-bytes", replicate.DefaultWriteBatchBytes, "flush the write buffer at this many bytes")
	fs.Int64Var(&f.maxInflight, "max-inflight-bytes", replicate.DefaultMaxInflightBytes, "bytes of documents and attachments held in memory at once, shared by all databases in flight (the default is 256 MiB; 0 selects it)")
	fs.DurationVar(&f.checkpointEvery, "checkpoint-interval", replicate.DefaultCheckpointInterval, "time between checkpoints while running")
	fs.Int64Var(&f.streamThreshold, "stream-threshold", replicate.DefaultStreamThreshold, "attachments of at least this many bytes are piped from source to target, never held in memory (0: the default; -1: never)")
	fs.BoolVar(&f.noCheckpoints, "no-checkpoints", false, "neither read nor write _local checkpoints (always start from the beginning; a database the run creates still gets its small claim document, so that a rerun takes it for its own)")
}

// validate refuses negative sizes and counts (zero selects the default).
func (f *engineFlags) validate() error {
	for name, v := range map[string]int64{"workers": int64(f.workers), "batch-size": int64(f.batchSize),
		"fetch-batch": int64(f.fetchBatch), "write-batch-docs": int64(f.writeDocs), "write-batch-bytes": f.writeBytes,
		"max-inflight-bytes": f.maxInflight, "checkpoint-interval": int64(f.checkpointEvery)} {
		if v < 0 {
			return usageErr("--%s must not be negative (0 selects the default)", name)
		}
	}
	return nil
}

func (f *engineFlags) options() replicate.Options {
	return replicate.Options{
		Workers: f.workers, BatchSize: f.batchSize, FetchBatch: f.fetchBatch,
		WriteBatchDocs: f.writeDocs, WriteBatchBytes: f.writeBytes,
		MaxInflightBytes: f.maxInflight, CheckpointInterval: f.checkpointEvery,
		NoCheckpoints: f.noCheckpoints, StreamThreshold: f.streamThreshold,
	}
}

// setMemoryLimit sets the Go runtime's soft memory limit from the
// in-flight budget (budget + overhead), unless GOMEMLIMIT is set, so the
// garbage collector works harder before the process grows past it.
func (f *engineFlags) setMemoryLimit(extra int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	budget := f.maxInflight
	if budget <= 0 {
		budget = replicate.DefaultMaxInflightBytes
	}
	debug.SetMemoryLimit(budget + int64(max(f.workers, 1))*3*max(f.writeBytes, replicate.DefaultWriteBatchBytes) + extra + 32<<20)
}

// archiveGCPercent is the garbage collector's target of a backup and of
// a restore (GOGC; the runtime's default is 100). A backup's live heap is
// mostly long-lived: the zstd encoder of each chunk worker holds about 34
// MiB of match tables for the whole run. At 100 the heap grows to twice
// the live heap before a collection, so peak RSS rose from 86 to 121 MiB
// between 10,000 and 100,000 documents with the live heap flat (43-52
// MiB); at 25 it was 77 and 85 MiB, for a few percent more GC CPU. A
// restore's rose from 53-55 to 67 MiB; at 25 from 44-46 to 50 MiB, for
// 0.35 CPU-s more in a 14 s restore of 100,000 documents.
const archiveGCPercent = 25

// setGCPercent sets the garbage collector's target, unless GOGC is set.
func setGCPercent(p int) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(p)
	}
}

// clientFlags are the HTTP client's options.
type clientFlags struct {
	requestTimeout time.Duration
	retryTime      time.Duration
	max429Wait     time.Duration
	maxConns       int
	changesPage    int
	auth           string
	insecure       bool
	// tls holds the CA and client certificate files: [""] shared by both
	// endpoints, ["source"] and ["target"] for one of them (verbs with two
	// http endpoints only).
	tls map[string]*tlsFiles
}

// tlsFiles are the certificate files of one endpoint (or of both).
type tlsFiles struct{ ca, cert, key string }

// register adds the client flags; roles ("source", "target") adds
// --ROLE-ca-cert, --ROLE-client-cert and --ROLE-client-key, which win
// over the shared ones for that endpoint.
func (f *clientFlags) register(fs *pflag.FlagSet, roles ...string) {
	fs.DurationVar(&f.requestTimeout, "request-timeout", couch.DefaultAttemptTimeout, "time limit of one HTTP attempt (0: the default)")
	fs.DurationVar(&f.retryTime, "retry-time", couch.DefaultRetryTime, "total time one request (to a server, or to S3 for s3:// archives) may spend retrying network errors, timeouts and other 5xx; the first request to each server, at the start, gives up after 5 s whatever this says (0: the default)")
	fs.DurationVar(&f.max429Wait, "max-429-wait", couch.DefaultMax429Wait, "total time one request may wait on 429 and 503 rate limiting and on CouchDB's overload 500s (all_dbs_active, \"No DB shards could be opened\", which a node in maintenance mode answers too) (0: the default)")
	fs.IntVar(&f.maxConns, "max-conns", couch.DefaultMaxConns, "TCP connections per server (0: the default; a run warns when the open-file limit, ulimit -n, cannot hold them)")
	fs.IntVar(&f.changesPage, "changes-page", 0, "_changes rows asked per request (0: the server's default, 10000 on CouchDB, 2000 on PouchDB Server; -1: the whole feed in one request)")
	fs.StringVar(&f.auth, "auth", string(couch.AuthBasic), "how credentials are sent: basic (with every request) or cookie (once to /_session, then its AuthSession cookie; basic when the server has no /_session)")
	fs.BoolVar(&f.insecure, "insecure", false, "do NOT verify https server certificates (anyone on the network path can read and change the data and credentials; a warning is printed on every run)")
	f.tls = map[string]*tlsFiles{}
	for _, role := range append([]string{""}, roles...) {
		t := &tlsFiles{}
		f.tls[role] = t
		if role == "" {
			fs.StringVar(&t.ca, "ca-cert", "", "PEM file of the CA certificates trusted for https servers (instead of the system's)")
			fs.StringVar(&t.cert, "client-cert", "", "PEM file of the client certificate sent to https servers that ask for one (with --client-key)")
			fs.StringVar(&t.key, "client-key", "", "PEM file of the private key of --client-cert")
			continue
		}
		fs.StringVar(&t.ca, role+"-ca-cert", "", "--ca-cert for the "+role+" server only (wins over --ca-cert)")
		fs.StringVar(&t.cert, role+"-client-cert", "", "--client-cert for the "+role+" server only (with --"+role+"-client-key; wins over --client-cert)")
		fs.StringVar(&t.key, role+"-client-key", "", "--client-key for the "+role+" server only")
	}
}

// options are the client options shared by every endpoint.
func (f *clientFlags) options() couch.Options {
	t := f.tls[""]
	if t == nil {
		t = &tlsFiles{}
	}
	// OutageClock: a one-shot run takes a server that has not answered
	// for --retry-time as lost, whichever request is waiting (a
	// continuous run sets it false: it outlives outages)
	return couch.Options{AttemptTimeout: f.requestTimeout, RetryTime: f.retryTime, OutageClock: true, Max429Wait: f.max429Wait, MaxConns: f.maxConns, ChangesPage: f.changesPage,
		Auth: couch.AuthMode(f.auth), InsecureSkipVerify: f.insecure, CACertFile: t.ca, ClientCertFile: t.cert, ClientKeyFile: t.key}
}

// forRole returns opts with the certificate files of role ("SOURCE" or
// "TARGET") where its own flags set them.
func (f *clientFlags) forRole(role string, opts couch.Options) couch.Options {
	t := f.tls[strings.ToLower(role)]
	if t == nil {
		return opts
	}
	if t.ca != "" {
		opts.CACertFile = t.ca
	}
	if t.cert != "" || t.key != "" {
		opts.ClientCertFile, opts.ClientKeyFile = t.cert, t.key
	}
	return opts
}

// checkClientFlags refuses an unknown --auth and a client certificate
// without its key (or a key without its certificate), as usage errors.
func checkClientFlags(fs *pflag.FlagSet) error {
	if fl := fs.Lookup("auth"); fl != nil {
		if v := fl.Value.String(); v != string(couch.AuthBasic) && v != string(couch.AuthCookie) {
			return usageErr("--auth %q: want basic or cookie", v)
		}
	}
	for _, prefix := range []string{"", "source-", "target-"} {
		cert, key := fs.Lookup(prefix+"client-cert"), fs.Lookup(prefix+"client-key")
		if cert == nil || key == nil {
			continue
		}
		if (cert.Value.String() == "") != (key.Value.String() == "") {
			return usageErr("--%sclient-cert and --%sclient-key go together (one is missing)", prefix, prefix)
		}
	}
	// the PEM files named are files that can be read (a missing one was
	// a connection's failure, exit 1)
	for _, prefix := range []string{"", "source-", "target-"} {
		for _, name := range []string{"ca-cert", "client-cert", "client-key"} {
			fl := fs.Lookup(prefix + name)
			if fl == nil || fl.Value.String() == "" {
				continue
			}
			if err := readableFile(fl.Value.String()); err != nil {
				return usageErr("--%s%s: %w", prefix, name, err)
			}
			if name == "ca-cert" && fs.Lookup("insecure") != nil && fs.Lookup("insecure").Value.String() == "true" {
				return usageErr("--%s%s and --insecure: --insecure checks no certificate, so the CA file would be ignored; give one of them", prefix, name)
			}
		}
	}
	return nil
}

// readableFile refuses a path that is not a regular file this process
// can open.
func readableFile(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// numericFlags lists the numeric flags of every verb that checkFlagValues
// checks, by name, with the least value each accepts and what 0 (and -1) mean
// (for the error message). Flags a verb lacks are skipped. The engine flags are
// checked by engineFlags.validate.
var numericFlags = []struct {
	name string
	min  float64
	zero string
}{
	{"request-timeout", 0, "0 selects the default"},
	{"retry-time", 0, "0 selects the default"},
	{"max-429-wait", 0, "0 selects the default"},
	{"max-conns", 0, "0 selects the default"},
	{"changes-page", -1, "0 selects the default; -1: the whole feed in one request"},
	{"stream-threshold", -1, "0 selects the default; -1: never stream"},
	{"max-requests", 0, "0 selects the default"},
	{"max-dbs", 0, "0 selects the default"},
	{"max-rps", 0, "0: no cap"},
	{"ideal-duration", 0, "0: no spreading"},
	{"q", 0, "0: the target's default"},
	{"n", 0, "0: the target's default"},
	{"transfers", 0, "0 selects the default"},
	{"part-size", 0, "0 selects the default; below 5 MiB: 5 MiB"},
	{"progress-interval", 0, "0 selects the default"},
}

// checkRates refuses a --max-rps that would stall every request (a
// positive cap below minRPS: 1e-300 waited for ever), a positive
// --progress-interval below 10ms, and a
// --latency-tolerance that is not a number, infinite, or a factor below
// 1 (every request would count as overload).
func checkRates(fs *pflag.FlagSet) error {
	const minRPS = 0.01
	if fl := fs.Lookup("max-rps"); fl != nil {
		if v, err := strconv.ParseFloat(fl.Value.String(), 64); err == nil && v > 0 && v < minRPS {
			return usageErr("--max-rps %s is below %g requests per second (0: no cap)", fl.Value.String(), minRPS)
		}
	}
	if fl := fs.Lookup("progress-interval"); fl != nil {
		// 1ns printed 232,062 "waiting" lines in 2.7 s
		const minProgress = 10 * time.Millisecond
		if d, err := time.ParseDuration(fl.Value.String()); err == nil && d > 0 && d < minProgress {
			return usageErr("--progress-interval %s is below %s (0: the default)", fl.Value.String(), minProgress)
		}
	}
	if fl := fs.Lookup("latency-tolerance"); fl != nil {
		v, err := strconv.ParseFloat(fl.Value.String(), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v > 0 && v < 1 {
			return usageErr("--latency-tolerance %s: want a factor of at least 1 (0: the default, %g; negative: only 429, 503 and timeouts lower the limit)", fl.Value.String(), sofa.DefaultLatencyTolerance)
		}
	}
	return nil
}

// checkFlagValues refuses values of numericFlags below their least value
// (and a NaN --max-rps) with a usage error naming the flag. It reads the
// flags after env and config file have been applied, before any network
// access.
func checkFlagValues(fs *pflag.FlagSet) error {
	for _, nf := range numericFlags {
		fl := fs.Lookup(nf.name)
		if fl == nil {
			continue
		}
		var v float64
		var err error
		switch fl.Value.Type() {
		case "duration":
			var d time.Duration
			d, err = time.ParseDuration(fl.Value.String())
			v = float64(d)
		case "int", "int64":
			var i int64
			i, err = strconv.ParseInt(fl.Value.String(), 10, 64)
			v = float64(i)
		case "float64":
			v, err = strconv.ParseFloat(fl.Value.String(), 64)
		default:
			continue
		}
		if err != nil {
			return usageErr("--%s %s: %w", nf.name, fl.Value.String(), err)
		}
		if !(v >= nf.min) { // also refuses NaN
			what := "must not be negative"
			switch {
			case v != v:
				what = "is not a number"
			case nf.min < 0:
				what = fmt.Sprintf("must not be below %v", nf.min)
			}
			return usageErr("--%s %s (%s)", nf.name, what, nf.zero)
		}
	}
	if err := checkRates(fs); err != nil {
		return err
	}
	return checkClientFlags(fs)
}
