package archive

import (
	"fmt"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/sofadb/sofa/internal/dataset"
	"github.com/sofadb/sofa/replicate"
)

// synthChunks returns the raw doc-chunk bytes (lean records, as a backup
// writes them) of n of the benchmarks' synthetic 1 KiB documents.
func synthChunks(tb testing.TB, n int) []byte {
	var raw []byte
	err := dataset.Synth{Name: "bench", Docs: n, MinSize: 1024, Seed: 1}.DB().Each(func(rev []byte) error {
		d, err := replicate.ParseDoc(rev)
		if err != nil {
			return err
		}
		env, err := scanEnvelope(d.Body)
		if err != nil {
			return err
		}
		var f recordForm
		f.lean, f.omitRevs, f.omitDeleted = leanForm(d, env)
		raw = appendRecord(raw, d, d.Body, nil, f)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// BenchmarkChunkCodec compresses the doc chunks of 20,000 synthetic
// 1 KiB documents at each zstd level sofa could use, in chunks of 2 to 16
// MiB, reporting the stored/raw ratio: does a cheaper level over larger
// chunks compress as well as SpeedBestCompression over 2 MiB (issue 10)?
// (On these documents: no; chunk size changes the ratio by under 0.5%,
// SpeedBetterCompression is 12-13% larger than SpeedBestCompression.)
func BenchmarkChunkCodec(b *testing.B) {
	raw := synthChunks(b, 20000)
	for _, lvl := range []zstd.EncoderLevel{zstd.SpeedDefault, zstd.SpeedBetterCompression, zstd.SpeedBestCompression} {
		for _, chunk := range []int{2 << 20, 4 << 20, 8 << 20, 16 << 20} {
			b.Run(fmt.Sprintf("%s/%dMiB", lvl, chunk>>20), func(b *testing.B) {
				e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true),
					zstd.WithWindowSize(max(zstdWindow, chunk)), zstd.WithEncoderLevel(lvl), zstd.WithEncoderCRC(true))
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(raw)))
				var out []byte
				stored := 0
				for b.Loop() {
					stored = 0
					for i := 0; i < len(raw); i += chunk {
						out = e.EncodeAll(raw[i:min(len(raw), i+chunk)], out[:0])
						stored += len(out)
					}
				}
				b.ReportMetric(float64(stored)/float64(len(raw)), "ratio")
			})
		}
	}
}
