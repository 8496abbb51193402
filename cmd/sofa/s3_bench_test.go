package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/faultproxy"
)

// TestS3_UploadScalingBench measures the claim of BENCHMARKS.md section 7
// (where one TCP connection cannot fill the uplink, parallel part
// uploads scale) on sofa: a backup of about 200 MiB (SOFA_S3_BENCH_MIB)
// to versitygw through the fault proxy capping each connection at 8 MB/s
// (SOFA_S3_BENCH_BPS) with 20 ms added to each part, with --transfers 1,
// 2, 4 and 8: duration, throughput, the ratio to 1 transfer, and peak
// RSS against the bound (part size x (transfers + 1) over a local-file
// backup's peak). It takes minutes: only with SOFA_S3_BENCH=1.
func TestS3_UploadScalingBench(t *testing.T) {
	if os.Getenv("SOFA_S3_BENCH") == "" {
		t.Skip("a benchmark of minutes: set SOFA_S3_BENCH=1")
	}
	mib := envInt(t, "SOFA_S3_BENCH_MIB", 200)
	bps := envInt(t, "SOFA_S3_BENCH_BPS", 8_000_000)
	bin, s3srv, bucket, p, src := s3Proxied(t)
	// incompressible attachments of 1 MiB, 8 documents per request
	if err := src.Client().CreateDB(t.Context(), "media"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < mib; i += 8 {
		arWrite(t, src, "media", true, s3AttDocs(fmt.Sprintf("m%04d-", i), min(8, mib-i), 1<<20)...)
	}
	for _, kv := range s3srv.Env() {
		k, v, _ := cut(kv)
		t.Setenv(k, v)
	}
	t.Setenv("SOFA_S3_ENDPOINT", p.URL)

	local := filepath.Join(t.TempDir(), "local.sofa")
	t0 := time.Now()
	base := arPeakRSS(t, bin, "backup", src.URL, local, "-q")
	localDur := time.Since(t0)
	// the baseline is the larger of two runs: peak RSS varies by a few
	// tens of MiB from run to run on a loaded machine
	base = max(base, arPeakRSS(t, bin, "backup", src.URL, local, "-q", "--force"))
	st, _ := os.Stat(local)
	t.Logf("archive %.1f MiB; local-file backup %.1fs, peak RSS %d MiB (the larger of two runs: the backup's own memory)", float64(st.Size())/(1<<20), localDur.Seconds(), base>>20)

	p.SetLimits(faultproxy.Limits{ConnBytesPerSec: int64(bps)})
	if err := p.SetRules(faultproxy.Rule{Name: "latency", Method: "PUT", Delay: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	const partSize = 16 << 20
	var one time.Duration
	t.Logf("per-connection cap %.1f MB/s, +20 ms per part, part size 16 MiB", float64(bps)/1e6)
	t.Logf("| transfers | backup s | MiB/s | speed-up vs 1 | peak RSS MiB | bound MiB (local peak + 16 MiB x (transfers+1)) |")
	for _, n := range []int{1, 2, 4, 8} {
		key := fmt.Sprintf("s3://%s/t%d.sofa", bucket, n)
		t0 := time.Now()
		rss := arPeakRSS(t, bin, "backup", src.URL, key, "-q", "--transfers", strconv.Itoa(n))
		d := time.Since(t0)
		if n == 1 {
			one = d
		}
		bound := base + int64(partSize*(n+1))
		t.Logf("| %d | %.1f | %.1f | %.2fx | %d | %d |", n, d.Seconds(), float64(st.Size())/(1<<20)/d.Seconds(), one.Seconds()/d.Seconds(), rss>>20, bound>>20)
		if rss > bound {
			t.Errorf("transfers %d: peak RSS %d MiB over the bound %d MiB", n, rss>>20, bound>>20)
		}
	}
	p.SetLimits(faultproxy.Limits{})
	p.SetRules()
	arSofa(t, bin, nil, "verify", fmt.Sprintf("s3://%s/t4.sofa", bucket), src.URL, "-q").want(t, exitOK)
}

func envInt(t *testing.T, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return n
	}
	return def
}

func cut(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}
