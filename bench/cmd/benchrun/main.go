// Command benchrun runs sofa's benchmarks against its peers on servers it
// starts itself (in-memory PouchDB Servers, or with -server couchdb CouchDB
// instances from the release; -server-url names running CouchDB servers), prints one table per benchmark and
// appends every measurement to a JSON-lines file. scripts/bench.sh builds
// and runs it; BENCHMARKS.md describes each benchmark.
//
//	benchrun [flags] [replicate|latency|fleet|controller|backup|seeds|s3|lag|soak ...]
//
// With no names every benchmark runs. Each tool run is a child process
// measured with wait4 (wall time, CPU time of the process tree, peak RSS of
// its largest process); servers are started fresh per benchmark and every
// target database or server is new for each run. -smoke shrinks every
// size so that a full pass takes a minute or two (for checking the
// harness, not for numbers).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
)

// benchmark is one named benchmark.
type benchmark struct {
	name string
	run  func(ctx context.Context, e *env) error
	// optIn: runs only when named (not part of a run without names).
	optIn bool
}

var benchmarks = []benchmark{
	{"replicate", benchReplicateAll, false},
	{"latency", benchLatency, false},
	{"fleet", benchFleet, false},
	{"controller", benchController, false},
	{"backup", benchBackup, false},
	{"seeds", benchSeeds, true},
	{"s3", benchS3, true},
	{"lag", benchLag, true},
	{"soak", benchSoak, true},
}

func main() {
	os.Exit(run())
}

func run() int {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("benchrun", flag.ContinueOnError)
	cfg.register(fs)
	fs.Usage = func() {
		names := make([]string, len(benchmarks))
		for i, b := range benchmarks {
			names[i] = b.name
		}
		fmt.Fprintf(os.Stderr, "Usage: benchrun [flags] [%s ...]\n\nFlags:\n", strings.Join(names, "|"))
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if cfg.smoke {
		cfg.shrink()
	}
	if cfg.serverURL != "" {
		// internal/couchtest hands these out (wiped) instead of
		// starting CouchDB from the release.
		os.Setenv(couchtest.EnvCouchURL, cfg.serverURL)
		cfg.server = kindCouchDB
	}
	if cfg.server != kindPouchDB && cfg.server != kindCouchDB {
		fmt.Fprintf(os.Stderr, "benchrun: -server %q: want pouchdb or couchdb\n", cfg.server)
		return 2
	}
	selected, err := pick(fs.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e, err := newEnv(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		return 1
	}
	defer e.close()
	m := machine()
	m["smoke"] = cfg.smoke
	m["server"] = cfg.server
	if cfg.serverURL != "" {
		m["server_urls"] = redactList(cfg.serverURL)
	}
	e.sink.write(record{Bench: "env", Tool: "benchrun", OK: true, Extra: m})
	fmt.Printf("benchrun: results appended to %s\n", cfg.out)
	fmt.Printf("benchrun: %v CPUs (%v), load average %v, node %v, server %s, smoke %v\n", m["cpus"], m["cpu"], m["loadavg"], m["node"], cfg.server, cfg.smoke)
	failed := 0
	for _, b := range selected {
		t0 := time.Now()
		fmt.Fprintf(os.Stderr, "benchrun: %s: start\n", b.name)
		if err := b.run(ctx, e); err != nil {
			failed++
			fmt.Fprintf(os.Stderr, "benchrun: %s: %v\n", b.name, err)
			e.sink.write(record{Bench: b.name, Tool: "benchrun", Error: err.Error()})
		}
		e.stopServers()
		fmt.Fprintf(os.Stderr, "benchrun: %s: done in %s\n", b.name, time.Since(t0).Round(time.Second))
		if ctx.Err() != nil {
			break
		}
	}
	end := machine()
	e.sink.write(record{Bench: "env-end", Tool: "benchrun", OK: true, Extra: map[string]any{"time": end["time"], "loadavg": end["loadavg"]}})
	fmt.Printf("benchrun: load average at the end %v\n", end["loadavg"])
	if failed > 0 || ctx.Err() != nil {
		return 1
	}
	return 0
}

func pick(names []string) ([]benchmark, error) {
	if len(names) == 0 {
		var out []benchmark
		for _, b := range benchmarks {
			if !b.optIn {
				out = append(out, b)
			}
		}
		return out, nil
	}
	var out []benchmark
	for _, n := range names {
		found := false
		for _, b := range benchmarks {
			if b.name == n {
				out = append(out, b)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown benchmark %q", n)
		}
	}
	return out, nil
}

// env is what every benchmark shares: paths, the results sink, the
// configuration and the servers started so far (stopped after each
// benchmark).
type env struct {
	cfg  *config
	root string // repository root (holds node_modules and bench/)
	sofa string // sofa binary
	// measureBin is bench/cmd/measure, which runs each tool and reports
	// its rusage.
	measureBin string
	tmp        string // scratch directory, removed at the end
	sink       *sink
	verbose    bool
	servers    []*server
}

func newEnv(cfg *config) (*env, error) {
	root, err := filepath.Abs(cfg.root)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", ".bin", "pouchdb-server")); err != nil {
		return nil, fmt.Errorf("no node_modules/.bin/pouchdb-server under %s (run npm ci there)", root)
	}
	sofa, err := filepath.Abs(cfg.sofa)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(sofa); err != nil {
		return nil, fmt.Errorf("sofa binary: %w", err)
	}
	tmp, err := os.MkdirTemp(cfg.tmp, "sofa-bench-")
	if err != nil {
		return nil, err
	}
	mb := cfg.measure
	if mb == "" {
		mb = filepath.Join(tmp, "measure")
		build := exec.Command("go", "build", "-o", mb, "./bench/cmd/measure")
		build.Dir, build.Stderr = root, os.Stderr
		if err := build.Run(); err != nil {
			return nil, fmt.Errorf("build bench/cmd/measure: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(cfg.out), 0o755); err != nil {
		return nil, err
	}
	s, err := openSink(cfg.out)
	if err != nil {
		return nil, err
	}
	return &env{cfg: cfg, root: root, sofa: sofa, measureBin: mb, tmp: tmp, sink: s, verbose: cfg.verbose}, nil
}

func (e *env) stopServers() {
	for _, s := range e.servers {
		s.stop()
	}
	e.servers = nil
}

func (e *env) close() {
	e.stopServers()
	_ = e.sink.close()
	_ = os.RemoveAll(e.tmp)
}

// node returns the command line of a script under bench/.
func (e *env) node(script string, args ...string) (string, []string) {
	return "node", append([]string{filepath.Join(e.root, "bench", script)}, args...)
}

func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchrun: "+format+"\n", args...)
}

// redactList is a comma-separated URL list without credentials.
func redactList(urls string) string {
	var out []string
	for _, u := range strings.Split(urls, ",") {
		out = append(out, redact(strings.TrimSpace(u)))
	}
	return strings.Join(out, ",")
}
