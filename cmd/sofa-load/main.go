// Command sofa-load fills a CouchDB-compatible server with real public data
// or deterministic synthetic data, for demos, tests and benchmarks.
//
//	sofa-load --target http://127.0.0.1:5984 --set real --scale 0.1
//	sofa-load --target URL --set synthetic --docs 10000 --size 1024
//	sofa-load --target URL --set atts_db
//
// It prints one line per database and a total (or JSON lines with --json).
// Exit status: 0 all written, 1 error, 2 usage error, 3 some revisions were
// refused by the server (listed on stderr).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sofadb/sofa/internal/dataset"
)

type config struct {
	target      string
	set         string
	nodeModules string
	opts        dataset.Options
	synth       dataset.Synth
	atts        string
	loader      dataset.Loader
	jsonOut     bool
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "sofa-load:", err)
		return 2
	}
	dbs, err := sets(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "sofa-load:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	start := time.Now()
	results, err := cfg.loader.LoadAll(ctx, cfg.target, dbs)
	elapsed := time.Since(start)
	failed := report(cfg, results, elapsed, stdout, stderr)
	switch {
	case err != nil:
		fmt.Fprintln(stderr, "sofa-load:", err)
		return 1
	case failed > 0:
		return 3
	}
	return 0
}

func parse(args []string, stderr io.Writer) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("sofa-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: sofa-load --target SERVER_URL [flags]

Sets (--set):
  real        countries + cities + emoji (the default)
  countries   one database per country: country-<code> (record, flag.svg, its cities)
  cities      one database "cities", one small document per city (171,075)
  emoji       one database "emoji": records with 64 px PNGs, sprite sheets up to 11 MB
  synthetic   one database (--name) of --docs documents of --size bytes
  %s
              presets after the CouchDB "new replicator" benchmark; revtree has
              conflicts and tombstones. --scale shrinks them.

Flags:
`, strings.Join(dataset.Presets(), ", "))
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.target, "target", "", "server URL, e.g. http://127.0.0.1:5984 (required)")
	fs.StringVar(&cfg.set, "set", "real", "data set to load (see above)")
	fs.StringVar(&cfg.nodeModules, "node-modules", "", "node_modules directory holding the data packages (default: nearest ./node_modules upwards)")
	fs.Float64Var(&cfg.opts.Scale, "scale", 1, "fraction of every collection or preset to load, in (0,1]")
	fs.IntVar(&cfg.opts.Limit, "limit", 0, "cap on items per collection of the real sets (0: none)")
	fs.StringVar(&cfg.synth.Name, "name", "synthetic", "database name for --set synthetic")
	fs.IntVar(&cfg.synth.Docs, "docs", 1000, "documents for --set synthetic")
	fs.IntVar(&cfg.synth.MinSize, "size", 1024, "body bytes per document for --set synthetic")
	fs.IntVar(&cfg.synth.MaxSize, "max-size", 0, "if > --size, bodies spread from --size to this")
	fs.StringVar(&cfg.atts, "atts", "", "comma-separated attachment sizes in bytes per document for --set synthetic (k/m suffixes)")
	fs.IntVar(&cfg.synth.Depth, "depth", 1, "revisions of history per document for --set synthetic")
	fs.IntVar(&cfg.synth.ConflictEvery, "conflict-every", 0, "give every k-th document conflicts (--set synthetic)")
	fs.IntVar(&cfg.synth.Conflicts, "conflicts", 1, "extra leaves per conflicted document (--set synthetic)")
	fs.IntVar(&cfg.synth.DeleteEvery, "delete-every", 0, "make every k-th document a tombstone (--set synthetic)")
	fs.Uint64Var(&cfg.synth.Seed, "seed", 1, "content seed for --set synthetic")
	fs.IntVar(&cfg.loader.BatchDocs, "batch", 500, "revisions per _bulk_docs request")
	fs.IntVar(&cfg.loader.Parallel, "parallel", 4, "_bulk_docs requests in flight per database")
	fs.IntVar(&cfg.loader.DBParallel, "db-parallel", 4, "databases loaded at once")
	fs.BoolVar(&cfg.loader.Keep, "keep", false, "write into existing databases instead of recreating them")
	fs.BoolVar(&cfg.jsonOut, "json", false, "print one JSON line per database and a total line")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if cfg.target == "" {
		return nil, errors.New("--target is required")
	}
	if u, err := url.Parse(cfg.target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("--target must be an http(s) server URL")
	}
	if cfg.opts.Scale <= 0 || cfg.opts.Scale > 1 {
		return nil, errors.New("--scale must be in (0,1]")
	}
	sizes, err := parseSizes(cfg.atts)
	if err != nil {
		return nil, err
	}
	cfg.synth.Atts = sizes
	return cfg, nil
}

// sets builds the databases of cfg.set.
func sets(cfg *config) ([]dataset.DB, error) {
	if s, ok := dataset.Preset(cfg.set, cfg.opts.Scale); ok {
		return []dataset.DB{s.DB()}, nil
	}
	if cfg.set == "synthetic" {
		if cfg.synth.Docs < 0 || cfg.synth.MinSize < 0 {
			return nil, errors.New("--docs and --size must not be negative")
		}
		return []dataset.DB{cfg.synth.DB()}, nil
	}
	dir := cfg.nodeModules
	if dir == "" {
		var err error
		if dir, err = findNodeModules(); err != nil {
			return nil, err
		}
	}
	switch cfg.set {
	case "real":
		return dataset.Real(dir, cfg.opts)
	case "countries":
		return dataset.Countries(dir, cfg.opts)
	case "cities":
		db, err := dataset.Cities(dir, cfg.opts)
		return []dataset.DB{db}, err
	case "emoji":
		db, err := dataset.Emoji(dir, cfg.opts)
		return []dataset.DB{db}, err
	}
	return nil, fmt.Errorf("unknown --set %q", cfg.set)
}

// findNodeModules returns the nearest node_modules directory at or above
// the working directory.
func findNodeModules() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "node_modules")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no node_modules directory found; run npm ci at the repository root or pass --node-modules")
		}
		dir = parent
	}
}

// parseSizes reads "30,41k,2m" as byte counts (k = 1024, m = 1024*1024).
func parseSizes(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		mul := 1
		switch {
		case strings.HasSuffix(f, "k"):
			mul, f = 1<<10, strings.TrimSuffix(f, "k")
		case strings.HasSuffix(f, "m"):
			mul, f = 1<<20, strings.TrimSuffix(f, "m")
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--atts: bad size %q", f)
		}
		out = append(out, n*mul)
	}
	return out, nil
}

// report prints the results and returns the number of refused revisions.
func report(cfg *config, results []dataset.Result, elapsed time.Duration, stdout, stderr io.Writer) int {
	var revs, failed, dbs int
	var bytes int64
	enc := json.NewEncoder(stdout)
	for _, r := range results {
		if r.DB == "" {
			continue // not started
		}
		dbs++
		revs += r.Revs
		bytes += r.Bytes
		failed += len(r.Failures)
		for _, f := range r.Failures {
			fmt.Fprintf(stderr, "sofa-load: %s: refused %s\n", r.DB, f)
		}
		if cfg.jsonOut {
			_ = enc.Encode(map[string]any{"db": r.DB, "revs": r.Revs, "bytes": r.Bytes,
				"failures": len(r.Failures), "ms": r.Elapsed.Milliseconds()})
		} else if len(results) <= 20 {
			fmt.Fprintf(stdout, "%-24s %9d revs %10s %8.2fs\n", r.DB, r.Revs, mb(r.Bytes), r.Elapsed.Seconds())
		}
	}
	rate := float64(revs) / elapsed.Seconds()
	if cfg.jsonOut {
		_ = enc.Encode(map[string]any{"total": true, "set": cfg.set, "dbs": dbs, "revs": revs, "bytes": bytes,
			"failures": failed, "ms": elapsed.Milliseconds(), "revs_per_s": int(rate)})
	} else {
		fmt.Fprintf(stdout, "loaded %d databases, %d revisions, %s in %.2fs (%.0f revs/s), %d refused\n",
			dbs, revs, mb(bytes), elapsed.Seconds(), rate, failed)
	}
	return failed
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
