package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sofadb/sofa/internal/s3test"
)

// s3Peer is one way of uploading the local archive file: a command line
// run under `env` with extra variables, with set connections of part
// bytes.
type s3Peer struct {
	name string
	set  s3Setting
	bin  string   // looked up in PATH; missing: the peer is skipped
	env  []string // NAME=VALUE for this run only
	args []string
}

// s3Peers are `aws s3 cp` (its default 10 requests of 8 MiB chunks, then
// 4 and 8 with sofa's part size) and `rclone copyto` (its default 4
// streams of 5 MiB, then 8 with sofa's part size), each uploading file to
// @KEY@ in bucket through endpoint, with the test server's credentials.
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
	awsPeer := func(name string, n int, set s3Setting) s3Peer {
		return s3Peer{name: name, set: set, bin: "aws",
			env:  []string{"AWS_CONFIG_FILE=" + awsConf(n)},
			args: []string{"s3", "cp", "--only-show-errors", "--endpoint-url", endpoint, file, "s3://" + bucket + "/@KEY@"}}
	}
	// (-u AWS_CA_BUNDLE: rclone's AWS SDK refuses a custom CA bundle with
	// its own HTTP transport: "unsupported transport, *fshttp.Transport")
	rcloneEnv := []string{"-u", "AWS_CA_BUNDLE", "RCLONE_CONFIG=/dev/null", "RCLONE_S3_PROVIDER=Other", "RCLONE_S3_ENV_AUTH=false",
		"RCLONE_S3_ACCESS_KEY_ID=" + s3test.AccessKey, "RCLONE_S3_SECRET_ACCESS_KEY=" + s3test.SecretKey,
		"RCLONE_S3_ENDPOINT=" + endpoint, "RCLONE_S3_REGION=" + s3test.Region, "RCLONE_S3_FORCE_PATH_STYLE=true"}
	rclonePeer := func(name string, set s3Setting, extra ...string) s3Peer {
		return s3Peer{name: name, set: set, bin: "rclone", env: rcloneEnv,
			args: append([]string{"copyto", "--s3-no-check-bucket", file, ":s3:" + bucket + "/@KEY@"}, extra...)}
	}
	ps := fmt.Sprintf("%dM", part>>20)
	return []s3Peer{
		awsPeer("aws s3 cp default (10 x 8 MiB)", 0, s3Setting{10, 8 << 20}),
		awsPeer(fmt.Sprintf("aws s3 cp 4 x %d MiB", part>>20), 4, s3Setting{4, part}),
		awsPeer(fmt.Sprintf("aws s3 cp 8 x %d MiB", part>>20), 8, s3Setting{8, part}),
		rclonePeer("rclone copyto default (4 x 5 MiB)", s3Setting{4, 5 << 20}),
		rclonePeer(fmt.Sprintf("rclone copyto 8 x %d MiB", part>>20), s3Setting{8, part}, "--s3-upload-concurrency", "8", "--s3-chunk-size", ps),
	}
}

// peerUploads: the peers upload the local archive through the same proxy.
func (b *s3Bench) peerUploads(ctx context.Context) error {
	for _, p := range b.peers {
		if err := ctx.Err(); err != nil {
			return err
		}
		r0 := b.base
		r0.Tool = p.name
		if _, err := exec.LookPath(p.bin); err != nil {
			r0.Error = "not installed: " + p.bin
			b.e.sink.write(r0)
			b.peerRuns = append(b.peerRuns, r0)
			fmt.Printf("  s3: %s skipped: %s is not installed (scripts/bench-debs.sh installs awscli and rclone)\n", p.name, p.bin)
			continue
		}
		key := strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(p.name) + ".sofa"
		args := append(append(append([]string{}, p.env...), p.bin), p.args...)
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "@KEY@", key)
		}
		r, _ := b.e.runTool(ctx, r0, nil, "env", args...)
		r.ArchiveBytes = b.size(key)
		if r.OK && r.ArchiveBytes != b.arch {
			r.OK, r.Error = false, fmt.Sprintf("object of %d bytes, the file has %d", r.ArchiveBytes, b.arch)
		}
		r.Extra = map[string]any{"transfers": p.set.n, "part_size": p.set.part, "reduced": b.reduced}
		b.e.sink.write(r)
		b.drop(key)
		b.peerRuns = append(b.peerRuns, r)
		b.e.logf("s3: %s: %s in %s", p.name, status(r), secs(r.TimeMS))
		b.t.add(p.name, status(r), secs(r.TimeMS), b.rate(r), "", secs(r.CPUMS), mib(r.MaxRSSKB), "", "")
		if r.OK && (b.best.TimeMS == 0 || r.TimeMS < b.best.TimeMS) {
			b.best, b.bestSet = r, p.set
		}
	}
	if b.best.TimeMS > 0 {
		r := b.base
		r.Tool = "coucharchive's way: local backup + " + b.best.Tool
		r.OK, r.TimeMS = true, b.lb.TimeMS+b.best.TimeMS
		b.e.sink.write(r)
		b.t.add(r.Tool, "ok", secs(r.TimeMS), b.rate(r), "", "", "", "", "")
	}
	return nil
}

// report adds the ratios, each from this run.
func (b *s3Bench) report() {
	t, cfg := b.t, b.cfg
	if b.reduced {
		t.note("REDUCED SIZE (-s3-mib %d, the benchmark is %d MiB): the ratios below check the harness; they are not the targets' figures", cfg.s3MiB, s3FullMiB)
	}
	lo, hi := cfg.s3Transfers[0], cfg.s3Transfers[len(cfg.s3Transfers)-1]
	four := 4
	if _, ok := b.up[s3Setting{4, b.part}]; !ok {
		four = hi
	}
	at := func(m map[s3Setting]record, n int) int64 { return okTime(m[s3Setting{n, b.part}]) }
	t.note("sofa upload alone (the uploader's own scaling): %d transfers / %d: %s; %d / %d: %s", four, lo,
		check(ratio(at(b.alone, lo), at(b.alone, four)), at(b.alone, lo), at(b.alone, four), ">=", 3.5), hi, lo, ratio(at(b.alone, lo), at(b.alone, hi)))
	t.note("backup to s3: %d transfers / %d: %s (a backup is also bound by the source's read rate: local-file backup %s s)", four, lo,
		check(ratio(at(b.up, lo), at(b.up, four)), at(b.up, lo), at(b.up, four), ">=", 3.5), secs(b.lb.TimeMS))
	t.note("read (verify) from s3: %d transfers / %d: %s", four, lo, ratio(okTime(b.read[lo]), okTime(b.read[four])))
	if cfg.s3Restore {
		t.note("restore from s3: %d transfers / %d: %s; %d / %d: %s", four, lo, ratio(okTime(b.down[lo]), okTime(b.down[four])), hi, lo, ratio(okTime(b.down[lo]), okTime(b.down[hi])))
	} else {
		t.note("restore into the server not run (-s3-restore=false)")
	}
	// like for like: each peer against sofa's uploader at its connections
	// and part size
	for i, p := range b.peers {
		r := b.peerRuns[i]
		s := b.alone[p.set]
		t.note("%s / sofa upload alone %s: %s", p.name, p.set, check(ratio(okTime(r), okTime(s)), okTime(r), okTime(s), ">=", 1))
	}
	var fastest record
	var fastestSet s3Setting
	for s, r := range b.alone {
		if r.OK && (fastest.TimeMS == 0 || r.TimeMS < fastest.TimeMS) {
			fastest, fastestSet = r, s
		}
	}
	t.note("best peer (%s) / sofa's fastest upload alone (%s): %s", firstNonEmpty(b.best.Tool, "none"), fastestSet,
		check(ratio(b.best.TimeMS, fastest.TimeMS), b.best.TimeMS, fastest.TimeMS, ">=", 1))
	if b.best.TimeMS > 0 {
		bu := b.up[b.bestSet]
		t.note("best peer's upload alone / sofa backup to s3 at its setting (%s): %s", b.bestSet, check(ratio(b.best.TimeMS, okTime(bu)), b.best.TimeMS, okTime(bu), ">=", 1))
		t.note("backup then upload (%s + %s s) / sofa backup to s3 at the best peer's setting (%s): %s", secs(b.lb.TimeMS), secs(b.best.TimeMS), b.bestSet,
			check(ratio(b.lb.TimeMS+b.best.TimeMS, okTime(bu)), b.lb.TimeMS+b.best.TimeMS, okTime(bu), ">=", 1))
	}
	if len(b.overBound) == 0 {
		t.note("peak RSS of every backup to s3 within its bound: sofa's memory limit at the default flags + part size x (transfers + 1)")
	} else {
		t.note("peak RSS OVER the bound (memory limit + parts) for the backups at %s", strings.Join(b.overBound, ", "))
	}
	if len(b.overLocal) > 0 {
		t.note("above the local-file backup's peak + parts: %s", strings.Join(b.overLocal, "; "))
	}
}
