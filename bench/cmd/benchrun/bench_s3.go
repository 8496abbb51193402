package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/dataset"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/internal/s3test"
	"github.com/sofadb/sofa/replicate"
)

// benchS3 (issue 13 point 6): a backup of about -s3-mib MiB of CouchDB
// documents with attachments (atts_db's shape: 30 B, 41 KiB and 2 MiB
// random attachments per document) to versitygw through a fault proxy
// that caps each connection at -s3-bps bytes/s and delays every request
// by -s3-latency. In one run:
//
//   - sofa's uploader alone (bench/cmd/s3put: storage/s3's writer, the
//     local archive file in), at each -s3-transfers and at every peer's
//     connections and part size: the uploader's own scaling, and the
//     like-for-like comparison with the peers;
//   - sofa backup straight to s3:// at each -s3-transfers and at the
//     peers' settings; sofa verify (the read path) and sofa restore from
//     it at each -s3-transfers, restores checked by the oracle
//     (couchtest.CompareDBs);
//   - `aws s3 cp` and `rclone copyto` uploading the same local archive,
//     at their defaults and at 4 and 8 streams of sofa's part size;
//     coucharchive's way (local backup, then the best peer's upload).
//
// A run below s3FullMiB says REDUCED SIZE in its title, case and notes.
func benchS3(ctx context.Context, e *env) error {
	b := &s3Bench{e: e, cfg: e.cfg, part: int64(e.cfg.s3PartSize)}
	if err := b.setup(ctx); err != nil {
		return err
	}
	defer b.stop()
	if err := b.localBackups(ctx); err != nil {
		return err
	}
	b.peers = s3Peers(e.tmp, b.px.URL, b.bucket, b.local, b.part)
	steps := []func(context.Context) error{b.uploadsAlone, b.backups, b.reads, b.restores, b.peerUploads}
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := step(ctx); err != nil {
			return err
		}
	}
	b.report()
	b.t.print(os.Stdout)
	return nil
}

// s3Setting is a number of connections (transfers) and a part size.
type s3Setting struct {
	n    int
	part int64
}

func (s s3Setting) String() string { return fmt.Sprintf("%d x %d MiB", s.n, s.part>>20) }

// s3Bench is one run of the s3 benchmark.
type s3Bench struct {
	e      *env
	cfg    *config
	part   int64 // -s3-part-size
	src    *server
	gw     *s3test.Server
	px     *faultproxy.Proxy
	cli    *awss3.Client
	bucket string
	put    string // the s3put binary

	base    record
	t       *table
	reduced bool
	local   string // the local archive the peers and s3put upload
	arch    int64  // its size
	lb      record // the first local backup
	fixedKB int64  // the larger local backup's peak RSS

	peers     []s3Peer
	alone     map[s3Setting]record // s3put
	up        map[s3Setting]record // sofa backup -> s3
	read      map[int]record       // sofa verify s3
	down      map[int]record       // sofa restore <- s3
	peerRuns  []record
	best      record // the fastest peer
	bestSet   s3Setting
	restoreOf string // the object restores and reads use
	overBound []string
	overLocal []string
}

func (b *s3Bench) setup(ctx context.Context) error {
	e, cfg := b.e, b.cfg
	src, err := e.startServer(ctx)
	if err != nil {
		return err
	}
	b.src = src
	// atts_db's documents, as many as make -s3-mib MiB, in 4 databases
	// (loaded 2 at a time)
	perDoc := 30 + 41<<10 + 2<<20 + 1500
	docs := max(4, int(int64(cfg.s3MiB)<<20/int64(perDoc)))
	var dbs []dataset.DB
	for i := range 4 {
		n := docs / 4
		if i < docs%4 {
			n++
		}
		dbs = append(dbs, dataset.Synth{Name: fmt.Sprintf("atts-%d", i), Docs: n, MinSize: 1000, MaxSize: 2000,
			Atts: []int{30, 41 << 10, 2 << 20}, Seed: uint64(i + 1)}.DB())
	}
	if err := e.load(ctx, src.URL, dbs, 2); err != nil {
		return err
	}
	caseName := fmt.Sprintf("%d docs with 3 attachments (atts_db shape), 4 dbs", docs)
	b.reduced = cfg.s3MiB < s3FullMiB
	if b.reduced {
		caseName += fmt.Sprintf(" [REDUCED SIZE: -s3-mib %d < %d]", cfg.s3MiB, s3FullMiB)
	}
	b.base = record{Bench: "s3", Case: caseName}
	if b.put = cfg.s3put; b.put == "" {
		b.put = filepath.Join(e.tmp, "s3put")
		build := exec.Command("go", "build", "-o", b.put, "./bench/cmd/s3put")
		build.Dir, build.Stderr = e.root, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build bench/cmd/s3put: %w", err)
		}
	}

	if b.gw, err = s3test.StartDir(filepath.Join(e.tmp, "s3")); err != nil {
		return fmt.Errorf("versitygw: %w", err)
	}
	b.bucket = "bench"
	b.cli = s3test.Client(b.gw.URL)
	if _, err := b.cli.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(b.bucket)}); err != nil {
		return fmt.Errorf("create bucket: %w", err)
	}
	if b.px, err = faultproxy.Start(b.gw.URL, 1); err != nil {
		return err
	}
	b.px.KeepHost() // SigV4 signs the Host header
	if cfg.s3Latency > 0 {
		if err := b.px.SetRules(faultproxy.Rule{Name: "latency", Delay: cfg.s3Latency}); err != nil {
			return err
		}
	}
	b.px.SetLimits(faultproxy.Limits{ConnBytesPerSec: cfg.s3BPS})
	// sofa, s3put (and the AWS SDK) read these; the peers get their own
	for _, kv := range b.gw.Env() {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	os.Setenv("AWS_ENDPOINT_URL", b.px.URL)
	os.Setenv("SOFA_S3_ENDPOINT", b.px.URL)
	size := "full size"
	if b.reduced {
		size = fmt.Sprintf("REDUCED SIZE (-s3-mib %d; the benchmark is %d MiB): checks the harness only", cfg.s3MiB, s3FullMiB)
	}
	fmt.Printf("\ns3: %s; per-connection cap %.1f MB/s, +%s per request, part size %d MiB, versitygw %s (posix), source %s\n",
		size, float64(cfg.s3BPS)/1e6, cfg.s3Latency, b.part>>20, s3test.Version, kindName(src))
	title := "s3: " + caseName
	b.t = &table{title: title, head: []string{"run", "status", "time s", "MiB/s", "vs 1", "cpu s", "peak rss MiB", "bound MiB", "verify"}}
	b.alone, b.up = map[s3Setting]record{}, map[s3Setting]record{}
	b.read, b.down = map[int]record{}, map[int]record{}
	return nil
}

func (b *s3Bench) stop() {
	if b.px != nil {
		b.px.Stop()
	}
	if b.gw != nil {
		b.gw.Stop()
	}
}

func (b *s3Bench) drop(key string) {
	_, _ = b.cli.DeleteObject(context.Background(), &awss3.DeleteObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)})
}

func (b *s3Bench) size(key string) int64 {
	h, err := b.cli.HeadObject(context.Background(), &awss3.HeadObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)})
	if err != nil {
		return -1
	}
	return aws.ToInt64(h.ContentLength)
}

// rate is MiB/s of the archive in r's time.
func (b *s3Bench) rate(r record) string {
	if !r.OK || r.TimeMS <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(b.arch)/(1<<20)/(float64(r.TimeMS)/1000))
}

// boundKB is the backup's memory bound at s: Go's soft memory limit
// that sofa backup sets itself at the default flags (cmd/sofa
// engineFlags.setMemoryLimit: --max-inflight-bytes + --workers x 3 x
// --write-batch-bytes + --max-dbs MiB + 32 MiB: the fixed part) plus
// part size x (transfers + 1), which lives outside the Go heap.
func (b *s3Bench) boundKB(s s3Setting) int64 {
	limit := int64(replicate.DefaultMaxInflightBytes + replicate.DefaultWorkers*3*replicate.DefaultWriteBatchBytes + fleet.DefaultMaxDBs<<20 + 32<<20)
	return (limit + s.part*int64(s.n+1)) >> 10
}

// localBoundKB is the local-file backup's peak (the larger of two runs)
// plus part size x (transfers + 1): what a backup to s3 would hold were
// its engine and archive writer to hold what they hold writing a local
// file (they hold more while the upload is the slower side).
func (b *s3Bench) localBoundKB(s s3Setting) int64 { return b.fixedKB + s.part*int64(s.n+1)>>10 }

// localBackups: the archive the peers upload, its time (coucharchive's
// first step) and its peak RSS (the fixed overhead: the larger peak of
// two runs, which moves by tens of MiB on a loaded machine; the time is
// the first run's).
func (b *s3Bench) localBackups(ctx context.Context) error {
	e := b.e
	b.local = filepath.Join(e.tmp, "s3-local.sofa")
	for i := range 2 {
		r0 := b.base
		r0.Tool, r0.Run = "sofa backup local", i+1
		r, o := e.runTool(ctx, r0, []*server{b.src}, e.sofa, "backup", b.src.URL, b.local, "--json", "--force")
		applySofa(&r, o)
		r.ArchiveBytes = fileSize(b.local)
		e.sink.write(r)
		if !r.OK {
			return fmt.Errorf("local backup: %s", r.Error)
		}
		if i == 0 {
			b.lb = r
		}
		b.fixedKB = max(b.fixedKB, r.MaxRSSKB)
	}
	// the peers upload the file the last run left: two backups of one
	// source may differ by a few tar blocks (members written as their
	// databases' reads finish)
	b.arch = fileSize(b.local)
	e.logf("s3: archive %.1f MiB, local backup in %s, peak RSS %s MiB (larger of two: %s)", float64(b.arch)/(1<<20), secs(b.lb.TimeMS), mib(b.lb.MaxRSSKB), mib(b.fixedKB))
	b.t.add("sofa backup to local file", status(b.lb), secs(b.lb.TimeMS), b.rate(b.lb), "", secs(b.lb.CPUMS), mib(b.fixedKB), "", "")
	return nil
}

// settings are the sweep (-s3-transfers at -s3-part-size) and then every
// peer's connections and part size not in it.
func (b *s3Bench) settings() []s3Setting {
	var out []s3Setting
	seen := map[s3Setting]bool{}
	add := func(s s3Setting) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, n := range b.cfg.s3Transfers {
		add(s3Setting{n, b.part})
	}
	for _, p := range b.peers {
		add(p.set)
	}
	return out
}

// vsOne is the sweep's first setting's time over s's ("" off the sweep).
func (b *s3Bench) vsOne(m map[s3Setting]record, s s3Setting) string {
	if s.part != b.part {
		return ""
	}
	a, c := okTime(m[s3Setting{b.cfg.s3Transfers[0], b.part}]), okTime(m[s])
	if a <= 0 || c <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(c))
}

// uploadsAlone: the local archive through storage/s3's writer (s3put),
// each setting.
func (b *s3Bench) uploadsAlone(ctx context.Context) error {
	for _, s := range b.settings() {
		if err := ctx.Err(); err != nil {
			return err
		}
		key := fmt.Sprintf("alone-%d-%d.sofa", s.n, s.part>>20)
		r0 := b.base
		r0.Tool = "sofa upload alone (s3put) " + s.String()
		r, _ := b.e.runTool(ctx, r0, nil, b.put, "-transfers", strconv.Itoa(s.n), "-part-size", strconv.FormatInt(s.part, 10),
			b.local, "s3://"+b.bucket+"/"+key)
		r.ArchiveBytes = b.size(key)
		if r.OK && r.ArchiveBytes != b.arch {
			r.OK, r.Error = false, fmt.Sprintf("object of %d bytes, the file has %d", r.ArchiveBytes, b.arch)
		}
		r.Extra = map[string]any{"transfers": s.n, "part_size": s.part, "reduced": b.reduced}
		b.e.sink.write(r)
		b.drop(key)
		b.alone[s] = r
		b.e.logf("s3: sofa upload alone %s: %s in %s", s, status(r), secs(r.TimeMS))
		b.t.add("sofa upload alone (storage/s3, s3put), "+s.String(), status(r), secs(r.TimeMS), b.rate(r), b.vsOne(b.alone, s),
			secs(r.CPUMS), mib(r.MaxRSSKB), "", "")
	}
	return nil
}

// backups: sofa backup straight to s3://, each setting; the bound is the
// local backup's peak plus the parts.
func (b *s3Bench) backups(ctx context.Context) error {
	last := s3Setting{b.cfg.s3Transfers[len(b.cfg.s3Transfers)-1], b.part}
	for _, s := range b.settings() {
		if err := ctx.Err(); err != nil {
			return err
		}
		key := fmt.Sprintf("sofa-t%d-%d.sofa", s.n, s.part>>20)
		r0 := b.base
		r0.Tool = "sofa backup s3 " + s.String()
		r, o := b.e.runTool(ctx, r0, []*server{b.src}, b.e.sofa, "backup", b.src.URL, "s3://"+b.bucket+"/"+key,
			"--transfers", strconv.Itoa(s.n), "--part-size", strconv.FormatInt(s.part, 10), "--json")
		applySofa(&r, o)
		r.ArchiveBytes = b.size(key)
		if r.OK && r.ArchiveBytes <= 0 {
			r.OK, r.Error = false, "no object after a successful backup"
		}
		r.Extra = map[string]any{"transfers": s.n, "part_size": s.part, "bound_kb": b.boundKB(s), "local_bound_kb": b.localBoundKB(s), "reduced": b.reduced}
		b.e.sink.write(r)
		b.up[s] = r
		b.e.logf("s3: sofa backup %s: %s in %s, peak RSS %s MiB", s, status(r), secs(r.TimeMS), mib(r.MaxRSSKB))
		if r.OK && r.MaxRSSKB > b.boundKB(s) {
			b.overBound = append(b.overBound, s.String())
		}
		if r.OK && r.MaxRSSKB > b.localBoundKB(s) {
			b.overLocal = append(b.overLocal, fmt.Sprintf("%s (%s MiB, local + parts %s)", s, mib(r.MaxRSSKB), mib(b.localBoundKB(s))))
		}
		b.t.add("sofa backup -> s3, "+s.String(), status(r), secs(r.TimeMS), b.rate(r), b.vsOne(b.up, s),
			secs(r.CPUMS), mib(r.MaxRSSKB), mib(b.boundKB(s)), "")
		if r.OK && b.restoreOf == "" && s.part == b.part {
			b.restoreOf = key
		}
		if s != last && key != b.restoreOf {
			b.drop(key)
		}
	}
	return nil
}

// reads: sofa verify of the object alone (every member read and
// checked, no server): the read path of restore and ls.
func (b *s3Bench) reads(ctx context.Context) error {
	for _, n := range b.cfg.s3Transfers {
		if b.restoreOf == "" {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		r0 := b.base
		r0.Tool = fmt.Sprintf("sofa verify s3 transfers %d", n)
		r, _ := b.e.runTool(ctx, r0, nil, b.e.sofa, "verify", "s3://"+b.bucket+"/"+b.restoreOf,
			"--transfers", strconv.Itoa(n), "--part-size", strconv.FormatInt(b.part, 10), "-q")
		r.Extra = map[string]any{"transfers": n, "part_size": b.part, "reduced": b.reduced}
		b.e.sink.write(r)
		b.read[n] = r
		b.e.logf("s3: sofa verify (read), %d transfers: %s in %s", n, status(r), secs(r.TimeMS))
		b.t.add(fmt.Sprintf("sofa verify s3 (read), --transfers %d", n), status(r), secs(r.TimeMS), b.rate(r),
			vsOne(b.read, n), secs(r.CPUMS), mib(r.MaxRSSKB), "", "")
	}
	return nil
}

// restores: sofa restore from the local file (the target's ingest:
// restore's ceiling), then from s3:// at each -s3-transfers, each into a
// fresh server, the copy compared with the source by the oracle.
func (b *s3Bench) restores(ctx context.Context) error {
	if !b.cfg.s3Restore || b.restoreOf == "" {
		return nil
	}
	e := b.e
	restore := func(tool, from string, extra ...string) (record, error) {
		tgt, err := e.startServer(ctx)
		if err != nil {
			return record{}, err
		}
		defer e.stopServer(tgt)
		r0 := b.base
		r0.Tool = tool
		r, o := e.runTool(ctx, r0, []*server{tgt}, e.sofa, append([]string{"restore", from, tgt.URL, "--json"}, extra...)...)
		applySofa(&r, o)
		if r.OK {
			r.Verify = e.oracle(ctx, b.src.URL, tgt.URL, true, !tgt.couch())
			r.OK = r.Verify == "equal"
		}
		r.Extra = map[string]any{"reduced": b.reduced}
		e.sink.write(r)
		e.logf("s3: %s: %s in %s (%s)", tool, status(r), secs(r.TimeMS), r.Verify)
		return r, nil
	}
	r, err := restore("sofa restore local", b.local)
	if err != nil {
		return err
	}
	b.t.add("sofa restore <- local file", status(r), secs(r.TimeMS), b.rate(r), "", secs(r.CPUMS), mib(r.MaxRSSKB), "", shortVerify(r))
	for _, n := range b.cfg.s3Transfers {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := restore(fmt.Sprintf("sofa restore s3 transfers %d", n), "s3://"+b.bucket+"/"+b.restoreOf,
			"--transfers", strconv.Itoa(n), "--part-size", strconv.FormatInt(b.part, 10))
		if err != nil {
			return err
		}
		b.down[n] = r
		b.t.add(fmt.Sprintf("sofa restore <- s3, --transfers %d", n), status(r), secs(r.TimeMS), b.rate(r),
			vsOne(b.down, n), secs(r.CPUMS), mib(r.MaxRSSKB), "", shortVerify(r))
	}
	return nil
}

// vsOne is the first setting's time over n's ("1.00x" for the first).
func vsOne(m map[int]record, n int) string {
	lo := 0
	for k := range m {
		if lo == 0 || k < lo {
			lo = k
		}
	}
	a, b := okTime(m[lo]), okTime(m[n])
	if a <= 0 || b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(b))
}
