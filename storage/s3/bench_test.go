package s3_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/storage"
	"github.com/sofadb/sofa/storage/s3"
)

// TestUploadScalingBench measures the upload alone (no CouchDB, no
// archive writer): SOFA_S3_BENCH_MIB (200) MiB from memory to versitygw
// through the fault proxy capping each connection at SOFA_S3_BENCH_BPS
// (8 MB/s) with 20 ms added per part, for 1, 2, 4 and 8 transfers of 16
// MiB parts (SOFA_S3_BENCH_PART bytes), then reads it back with as many
// ranged GETs ahead. Only with SOFA_S3_BENCH=1.
func TestUploadScalingBench(t *testing.T) {
	if os.Getenv("SOFA_S3_BENCH") == "" {
		t.Skip("a benchmark of minutes: set SOFA_S3_BENCH=1")
	}
	mib, bps := 200, 8_000_000
	if v, err := strconv.Atoi(os.Getenv("SOFA_S3_BENCH_MIB")); err == nil {
		mib = v
	}
	if v, err := strconv.Atoi(os.Getenv("SOFA_S3_BENCH_BPS")); err == nil {
		bps = v
	}
	part := int64(16 << 20)
	if v, err := strconv.Atoi(os.Getenv("SOFA_S3_BENCH_PART")); err == nil {
		part = int64(v)
	}
	_, p, bucket := proxied(t)
	p.SetLimits(faultproxy.Limits{ConnBytesPerSec: int64(bps)})
	if err := p.SetRules(faultproxy.Rule{Name: "latency", Method: "PUT", Delay: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	data := pattern(mib << 20)
	var one float64
	t.Logf("%d MiB, per-connection cap %.1f MB/s, +20 ms per part, %d MiB parts", mib, float64(bps)/1e6, part>>20)
	t.Logf("| transfers | upload s | MiB/s | speed-up vs 1 |")
	for _, n := range []int{1, 2, 4, 8} {
		st := newStore(t, p.URL, s3.Options{Transfers: n, PartSize: part})
		t0 := time.Now()
		w, err := st.Create(context.Background(), fmt.Sprintf("s3://%s/t%d", bucket, n), storage.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(data); off += 1 << 20 {
			if _, err := w.Write(data[off : off+1<<20]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		d := time.Since(t0).Seconds()
		if n == 1 {
			one = d
		}
		t.Logf("| %d | %.1f | %.1f | %.2fx |", n, d, float64(mib)/d, one/d)
	}
	// reading it back in order (restore, verify, ls), through the same
	// cap: ranged GETs ahead of the reader
	t.Logf("| transfers | read s | MiB/s | speed-up vs 1 |")
	for _, n := range []int{1, 2, 4, 8} {
		st := newStore(t, p.URL, s3.Options{Transfers: n, PartSize: part})
		t0 := time.Now()
		r, err := st.Open(context.Background(), fmt.Sprintf("s3://%s/t8", bucket))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.Copy(io.Discard, r)
		r.Close()
		if err != nil || got != int64(len(data)) {
			t.Fatalf("read %d bytes: %v", got, err)
		}
		d := time.Since(t0).Seconds()
		if n == 1 {
			one = d
		}
		t.Logf("| %d | %.1f | %.1f | %.2fx |", n, d, float64(mib)/d, one/d)
	}
}
