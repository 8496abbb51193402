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

	"github.com/sofadb/sofa/internal/dataset"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/internal/s3test"
)

// s3Peer is one way of uploading the local archive file: a command line
// run under `env` with extra variables.
type s3Peer struct {
	name string
	bin  string   // looked up in PATH; missing: the peer is skipped
	env  []string // NAME=VALUE for this run only
	args []string
}

// benchS3 (issue 13 point 6): a backup of about -s3-mib MiB of CouchDB
// documents with attachments (atts_db's shape: 30 B, 41 KiB and 2 MiB
// random attachments per document) to versitygw through a fault proxy
// that caps each connection at -s3-bps bytes/s and delays every request
// by -s3-latency. sofa backup straight to s3:// and sofa restore from it
// with each of -s3-transfers; `aws s3 cp` and `rclone copyto` uploading
// the local archive sofa wrote, at their defaults and at 4 and 8 streams;
// coucharchive's way (local backup, then the best peer's upload). Restored
// copies are checked by the oracle (couchtest.CompareDBs).
func benchS3(ctx context.Context, e *env) error {
	cfg := e.cfg
	part := int64(cfg.s3PartSize)
	src, err := e.startServer(ctx)
	if err != nil {
		return err
	}
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

	gw, err := s3test.StartDir(filepath.Join(e.tmp, "s3"))
	if err != nil {
		return fmt.Errorf("versitygw: %w", err)
	}
	defer gw.Stop()
	bucket := "bench"
	cli := s3test.Client(gw.URL)
	if _, err := cli.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return fmt.Errorf("create bucket: %w", err)
	}
	px, err := faultproxy.Start(gw.URL, 1)
	if err != nil {
		return err
	}
	defer px.Stop()
	px.KeepHost() // SigV4 signs the Host header
	if cfg.s3Latency > 0 {
		if err := px.SetRules(faultproxy.Rule{Name: "latency", Delay: cfg.s3Latency}); err != nil {
			return err
		}
	}
	px.SetLimits(faultproxy.Limits{ConnBytesPerSec: cfg.s3BPS})
	// sofa (and the AWS SDK) read these; the peers get their own below
	for _, kv := range gw.Env() {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	os.Setenv("AWS_ENDPOINT_URL", px.URL)
	os.Setenv("SOFA_S3_ENDPOINT", px.URL)
	drop := func(key string) {
		_, _ = cli.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	}
	size := func(key string) int64 {
		h, err := cli.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			return -1
		}
		return aws.ToInt64(h.ContentLength)
	}
	fmt.Printf("\ns3: per-connection cap %.1f MB/s, +%s per request, part size %d MiB, versitygw %s (posix), source %s\n",
		float64(cfg.s3BPS)/1e6, cfg.s3Latency, part>>20, s3test.Version, kindName(src))

	t := &table{title: "s3: " + caseName, head: []string{"run", "status", "time s", "MiB/s", "vs 1", "cpu s", "peak rss MiB", "bound MiB", "verify"}}
	base := record{Bench: "s3", Case: caseName}
	// local-file backup: the archive the peers upload, its time
	// (coucharchive's first step) and its peak RSS (the fixed overhead)
	// (the larger peak of two runs: it moves by tens of MiB from run to
	// run on a loaded machine; the time is the first run's)
	local := filepath.Join(e.tmp, "s3-local.sofa")
	var lb record
	var fixedKB int64
	for i := range 2 {
		b := base
		b.Tool, b.Run = "sofa backup local", i+1
		r, o := e.runTool(ctx, b, []*server{src}, e.sofa, "backup", src.URL, local, "--json", "--force")
		applySofa(&r, o)
		r.ArchiveBytes = fileSize(local)
		e.sink.write(r)
		if !r.OK {
			return fmt.Errorf("local backup: %s", r.Error)
		}
		if i == 0 {
			lb = r
		}
		fixedKB = max(fixedKB, r.MaxRSSKB)
	}
	arch := lb.ArchiveBytes
	rate := func(r record) string {
		if !r.OK || r.TimeMS <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", float64(arch)/(1<<20)/(float64(r.TimeMS)/1000))
	}
	e.logf("s3: archive %.1f MiB, local backup in %s, peak RSS %s MiB (larger of two: %s)", float64(arch)/(1<<20), secs(lb.TimeMS), mib(lb.MaxRSSKB), mib(fixedKB))
	t.add("sofa backup to local file", status(lb), secs(lb.TimeMS), rate(lb), "", secs(lb.CPUMS), mib(fixedKB), "", "")
	boundKB := func(n int) int64 { return fixedKB + part*int64(n+1)>>10 }

	// sofa backup straight to s3://, each transfers setting
	ps := strconv.FormatInt(part, 10)
	up := map[int]record{}
	var overBound []string
	restoreKey := ""
	for _, n := range cfg.s3Transfers {
		if err := ctx.Err(); err != nil {
			return err
		}
		key := fmt.Sprintf("sofa-t%d.sofa", n)
		b := base
		b.Tool = fmt.Sprintf("sofa backup s3 transfers %d", n)
		r, o := e.runTool(ctx, b, []*server{src}, e.sofa, "backup", src.URL, "s3://"+bucket+"/"+key,
			"--transfers", strconv.Itoa(n), "--part-size", ps, "--json")
		applySofa(&r, o)
		r.ArchiveBytes = size(key)
		if r.OK && r.ArchiveBytes <= 0 {
			r.OK, r.Error = false, "no object after a successful backup"
		}
		r.Extra = map[string]any{"transfers": n, "part_size": part, "bound_kb": boundKB(n)}
		e.sink.write(r)
		up[n] = r
		e.logf("s3: sofa backup, %d transfers: %s in %s, peak RSS %s MiB", n, status(r), secs(r.TimeMS), mib(r.MaxRSSKB))
		if r.OK && r.MaxRSSKB > boundKB(n) {
			overBound = append(overBound, strconv.Itoa(n))
		}
		t.add(fmt.Sprintf("sofa backup -> s3, --transfers %d", n), status(r), secs(r.TimeMS), rate(r),
			vsOne(up, n), secs(r.CPUMS), mib(r.MaxRSSKB), mib(boundKB(n)), "")
		if r.OK && restoreKey == "" {
			restoreKey = key
		}
		if n != cfg.s3Transfers[len(cfg.s3Transfers)-1] && key != restoreKey {
			drop(key)
		}
	}

	// sofa verify of the object alone (every member read and checked,
	// no server): the read path of restore and ls, each transfers setting
	read := map[int]record{}
	for _, n := range cfg.s3Transfers {
		if restoreKey == "" {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		b := base
		b.Tool = fmt.Sprintf("sofa verify s3 transfers %d", n)
		r, _ := e.runTool(ctx, b, nil, e.sofa, "verify", "s3://"+bucket+"/"+restoreKey,
			"--transfers", strconv.Itoa(n), "--part-size", ps, "-q")
		r.Extra = map[string]any{"transfers": n, "part_size": part}
		e.sink.write(r)
		read[n] = r
		e.logf("s3: sofa verify (read), %d transfers: %s in %s", n, status(r), secs(r.TimeMS))
		t.add(fmt.Sprintf("sofa verify s3 (read), --transfers %d", n), status(r), secs(r.TimeMS), rate(r),
			vsOne(read, n), secs(r.CPUMS), mib(r.MaxRSSKB), "", "")
	}

	// sofa restore from a local file (the target's ingest: restore's
	// ceiling), then from s3://, each transfers setting, into a fresh
	// server; the copy is compared with the source by the oracle
	down := map[int]record{}
	restore := func(tool, from string, extra ...string) (record, error) {
		tgt, err := e.startServer(ctx)
		if err != nil {
			return record{}, err
		}
		defer e.stopServer(tgt)
		b := base
		b.Tool = tool
		r, o := e.runTool(ctx, b, []*server{tgt}, e.sofa, append([]string{"restore", from, tgt.URL, "--json"}, extra...)...)
		applySofa(&r, o)
		if r.OK {
			r.Verify = e.oracle(ctx, src.URL, tgt.URL, true, !tgt.couch())
			r.OK = r.Verify == "equal"
		}
		e.sink.write(r)
		e.logf("s3: %s: %s in %s (%s)", tool, status(r), secs(r.TimeMS), r.Verify)
		return r, nil
	}
	if cfg.s3Restore && restoreKey != "" {
		r, err := restore("sofa restore local", local)
		if err != nil {
			return err
		}
		t.add("sofa restore <- local file", status(r), secs(r.TimeMS), rate(r), "", secs(r.CPUMS), mib(r.MaxRSSKB), "", shortVerify(r))
	}
	for _, n := range cfg.s3Transfers {
		if restoreKey == "" || !cfg.s3Restore {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := restore(fmt.Sprintf("sofa restore s3 transfers %d", n), "s3://"+bucket+"/"+restoreKey,
			"--transfers", strconv.Itoa(n), "--part-size", ps)
		if err != nil {
			return err
		}
		down[n] = r
		t.add(fmt.Sprintf("sofa restore <- s3, --transfers %d", n), status(r), secs(r.TimeMS), rate(r),
			vsOne(down, n), secs(r.CPUMS), mib(r.MaxRSSKB), "", shortVerify(r))
	}

	// the peers upload the local archive through the same proxy
	var best record
	for _, p := range s3Peers(e.tmp, px.URL, bucket, local, part) {
		if err := ctx.Err(); err != nil {
			return err
		}
		b := base
		b.Tool = p.name
		if _, err := exec.LookPath(p.bin); err != nil {
			b.Error = "not installed: " + p.bin
			e.sink.write(b)
			fmt.Printf("  s3: %s skipped: %s is not installed (scripts/bench-debs.sh installs awscli and rclone)\n", p.name, p.bin)
			continue
		}
		key := strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(p.name) + ".sofa"
		args := append(append(append([]string{}, p.env...), p.bin), p.args...)
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "@KEY@", key)
		}
		r, _ := e.runTool(ctx, b, nil, "env", args...)
		r.ArchiveBytes = size(key)
		if r.OK && r.ArchiveBytes != arch {
			r.OK, r.Error = false, fmt.Sprintf("object of %d bytes, the file has %d", r.ArchiveBytes, arch)
		}
		e.sink.write(r)
		drop(key)
		e.logf("s3: %s: %s in %s", p.name, status(r), secs(r.TimeMS))
		t.add(p.name, status(r), secs(r.TimeMS), rate(r), "", secs(r.CPUMS), mib(r.MaxRSSKB), "", "")
		if r.OK && (best.TimeMS == 0 || r.TimeMS < best.TimeMS) {
			best = r
		}
	}
	if best.TimeMS > 0 {
		b := base
		b.Tool = "coucharchive's way: local backup + " + best.Tool
		b.OK, b.TimeMS = true, lb.TimeMS+best.TimeMS
		e.sink.write(b)
		t.add(b.Tool, "ok", secs(b.TimeMS), rate(b), "", "", "", "", "")
	}

	// ratios
	lo, hi := cfg.s3Transfers[0], cfg.s3Transfers[len(cfg.s3Transfers)-1]
	four := 4
	if _, ok := up[4]; !ok {
		four = hi
	}
	t.note("backup to s3: %d transfers / %d: %s", four, lo, check(ratio(okTime(up[lo]), okTime(up[four])), okTime(up[lo]), okTime(up[four]), ">=", 3.5))
	t.note("read (verify) from s3: %d transfers / %d: %s", four, lo, ratio(okTime(read[lo]), okTime(read[four])))
	if cfg.s3Restore {
		t.note("restore from s3: %d transfers / %d: %s", four, lo, ratio(okTime(down[lo]), okTime(down[four])))
	} else {
		t.note("restore into the server not run (-s3-restore=false)")
	}
	fastest := func(m map[int]record) record {
		var f record
		for _, r := range m {
			if r.OK && (f.TimeMS == 0 || r.TimeMS < f.TimeMS) {
				f = r
			}
		}
		return f
	}
	fu := fastest(up)
	t.note("best peer upload alone (%s) / sofa's fastest backup to s3 (%s): %s", firstNonEmpty(best.Tool, "none"), firstNonEmpty(fu.Tool, "none"),
		check(ratio(best.TimeMS, fu.TimeMS), best.TimeMS, fu.TimeMS, ">=", 1))
	if r, ok := up[4]; ok {
		t.note("best peer upload alone / sofa backup to s3 at the default 4 transfers: %s", check(ratio(best.TimeMS, okTime(r)), best.TimeMS, okTime(r), ">=", 1))
	}
	if best.TimeMS > 0 {
		t.note("backup then upload (%s + %s s) / sofa's fastest backup to s3: %s", secs(lb.TimeMS), secs(best.TimeMS),
			check(ratio(lb.TimeMS+best.TimeMS, fu.TimeMS), lb.TimeMS+best.TimeMS, fu.TimeMS, ">=", 1))
	}
	if len(overBound) == 0 {
		t.note("peak RSS within local-file backup peak + part size x (transfers + 1) for every transfers setting")
	} else {
		t.note("peak RSS OVER the bound at transfers %s", strings.Join(overBound, ", "))
	}
	t.print(os.Stdout)
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

// s3Peers are `aws s3 cp` (its default 10 requests of 8 MiB chunks, then
// 4 and 8 with sofa's part size) and `rclone copyto` (its default 4
// streams of 5 MiB, then 4 and 8 with sofa's part size), each uploading
// file to @KEY@ in bucket through endpoint, with the test server's
// credentials from the environment.
func s3Peers(tmp, endpoint, bucket, file string, part int64) []s3Peer {
	awsConf := func(n int) string {
		p := filepath.Join(tmp, fmt.Sprintf("aws-config-%d", n))
		conf := "[default]\nregion = " + s3test.Region + "\ns3 =\n"
		if n > 0 {
			conf += fmt.Sprintf("  max_concurrent_requests = %d\n  multipart_chunksize = %dMB\n", n, part>>20)
		}
		conf += "  addressing_style = path\n"
		_ = os.WriteFile(p, []byte(conf), 0o600)
		return p
	}
	awsPeer := func(name string, n int) s3Peer {
		return s3Peer{name: name, bin: "aws",
			env:  []string{"AWS_CONFIG_FILE=" + awsConf(n)},
			args: []string{"s3", "cp", "--only-show-errors", "--endpoint-url", endpoint, file, "s3://" + bucket + "/@KEY@"}}
	}
	// (-u AWS_CA_BUNDLE: rclone's AWS SDK refuses a custom CA bundle with
	// its own HTTP transport: "unsupported transport, *fshttp.Transport")
	rcloneEnv := []string{"-u", "AWS_CA_BUNDLE", "RCLONE_CONFIG=/dev/null", "RCLONE_S3_PROVIDER=Other", "RCLONE_S3_ENV_AUTH=false",
		"RCLONE_S3_ACCESS_KEY_ID=" + s3test.AccessKey, "RCLONE_S3_SECRET_ACCESS_KEY=" + s3test.SecretKey,
		"RCLONE_S3_ENDPOINT=" + endpoint, "RCLONE_S3_REGION=" + s3test.Region, "RCLONE_S3_FORCE_PATH_STYLE=true"}
	rclonePeer := func(name string, extra ...string) s3Peer {
		return s3Peer{name: name, bin: "rclone", env: rcloneEnv,
			args: append([]string{"copyto", "--s3-no-check-bucket", file, ":s3:" + bucket + "/@KEY@"}, extra...)}
	}
	ps := fmt.Sprintf("%dM", part>>20)
	return []s3Peer{
		awsPeer("aws s3 cp default (10 x 8 MiB)", 0),
		awsPeer(fmt.Sprintf("aws s3 cp 4 x %d MiB", part>>20), 4),
		awsPeer(fmt.Sprintf("aws s3 cp 8 x %d MiB", part>>20), 8),
		rclonePeer("rclone copyto default (4 x 5 MiB)"),
		rclonePeer(fmt.Sprintf("rclone copyto 8 x %d MiB", part>>20), "--s3-upload-concurrency", "8", "--s3-chunk-size", ps),
	}
}
