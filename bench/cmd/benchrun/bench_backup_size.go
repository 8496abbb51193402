package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"time"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// archiveLayout splits a sofa archive (a tar stream) into the bytes of its
// members' contents, the manifest, index and footer apart (contents), those
// three (catalog), and the rest: tar headers, PAX records of the members'
// checksums, padding and the trailer (framing). In format version 3 the
// contents are packs: their inner tar headers are in the contents,
// compressed.
func archiveLayout(file string) (contents, catalog, framing int64, err error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, 0, err
	}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, 0, 0, err
		}
		switch path.Base(h.Name) {
		case "manifest.json", "manifest.json.zst", "index.json.gz", "footer.json":
			catalog += h.Size
		default:
			contents += h.Size
		}
	}
	return contents, catalog, st.Size() - contents - catalog, nil
}

// codec is one compressor the compression bound tries.
type codec struct {
	name string
	new  func(w io.Writer) io.WriteCloser
}

func zstdCodec(name string, l zstd.EncoderLevel) codec {
	return codec{name, func(w io.Writer) io.WriteCloser {
		e, _ := zstd.NewWriter(w, zstd.WithEncoderLevel(l), zstd.WithEncoderConcurrency(1))
		return e
	}}
}

func gzipCodec(name string, l int) codec {
	return codec{name, func(w io.Writer) io.WriteCloser {
		z, _ := kgzip.NewWriterLevel(w, l)
		return z
	}}
}

func stdGzipCodec(name string, l int) codec {
	return codec{name, func(w io.Writer) io.WriteCloser {
		z, _ := gzip.NewWriterLevel(w, l)
		return z
	}}
}

// boundCodecs: Go's zstd at its four levels, klauspost's gzip at 1, 6 and
// 9 (faster than the standard library's at equal size), and the standard
// library's gzip -6 (what the benchmark's gzip sizes use).
var boundCodecs = []codec{
	zstdCodec("zstd fastest", zstd.SpeedFastest), zstdCodec("zstd default", zstd.SpeedDefault),
	zstdCodec("zstd better", zstd.SpeedBetterCompression), zstdCodec("zstd best", zstd.SpeedBestCompression),
	gzipCodec("gzip -1", 1), gzipCodec("gzip -6", 6), gzipCodec("gzip -9", 9), stdGzipCodec("gzip -6 (Go standard library)", 6),
}

// compressTry is one codec's result over a peer's output.
type compressTry struct {
	Codec string  `json:"codec"`
	Bytes int64   `json:"bytes"`
	CPUS  float64 `json:"cpu_s"`
}

// compressionBound compresses each of files on its own (as the peer's
// gzip size is taken) with every codec, on one locked thread, and returns
// every try and the cheapest in CPU whose total is at most limit bytes
// (ok false when none is). The CPU is the thread's own (RUSAGE_THREAD),
// so another process on the machine does not add to it.
func compressionBound(files []string, limit int64) (best compressTry, tries []compressTry, ok bool, err error) {
	var data [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return best, nil, false, err
		}
		data = append(data, b)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, c := range boundCodecs {
		var n int64
		t0, err := threadCPU()
		if err != nil {
			return best, nil, false, err
		}
		for _, b := range data {
			var cnt counter
			w := c.new(&cnt)
			if _, err := io.Copy(w, bytes.NewReader(b)); err != nil {
				return best, nil, false, fmt.Errorf("%s: %w", c.name, err)
			}
			if err := w.Close(); err != nil {
				return best, nil, false, fmt.Errorf("%s: %w", c.name, err)
			}
			n += cnt.n
		}
		t1, _ := threadCPU()
		try := compressTry{Codec: c.name, Bytes: n, CPUS: (t1 - t0).Seconds()}
		tries = append(tries, try)
		if n <= limit && (!ok || try.CPUS < best.CPUS) {
			best, ok = try, true
		}
	}
	return best, tries, ok, nil
}

// threadCPU is the calling thread's user and system time.
func threadCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// noteSizeSpeedBound notes the bound of "backup >= 2x the fastest peer"
// and "archive no larger than couchbackup's gzipped output" together: a
// backup reads every revision from the source, whose CPU for the read
// bound's requests (bound.ServerCPUMS) is the least it spends, and
// compresses at least what couchbackup wrote down to its gzipped size,
// the cheapest codec tried on couchbackup's own output (its first run).
// Both on the machine's cores: no backup meeting the size target is faster
// than their sum over the cores.
func (e *env) noteSizeSpeedBound(t *table, dumps map[string][]record, bound, fastest record) {
	best, ok := firstRun(dumps, "couchbackup", "couchbackup+shim").Extra["compression_bound"].(compressTry)
	if !ok || bound.ServerCPUMS <= 0 || okTime(fastest) <= 0 {
		return
	}
	cores := runtime.NumCPU()
	need := (float64(bound.ServerCPUMS)/1000 + best.CPUS) / float64(cores)
	half := float64(okTime(fastest)) / 2000
	verdict := "not stopped by it"
	if need > half {
		verdict = "out of reach on this machine"
	}
	t.note("backup 2x with the size target: the source's CPU for the read bound %.2f CPU-s + the cheapest compression of couchbackup's output to at most its gzipped size (%s, %.2f CPU-s, %s) = %.2f s on %d cores, against 2x %s = %.2f s: %s",
		float64(bound.ServerCPUMS)/1000, best.Codec, best.CPUS, mibBytes(best.Bytes)+" MiB", need, cores, fastest.Tool, half, verdict)
}

// firstRun is the first run's backup record of the first of names that ran.
func firstRun(dumps map[string][]record, names ...string) record {
	for _, name := range names {
		if rs := dumps[name]; len(rs) > 0 {
			return rs[0]
		}
	}
	return record{}
}

// noteArchiveLayout notes what sofa's archive holds beside its members'
// contents (its first run), against couchbackup's gzipped output.
func noteArchiveLayout(t *table, dumps map[string][]record) {
	sofa, couchbackup := firstRun(dumps, "sofa"), firstRun(dumps, "couchbackup", "couchbackup+shim")
	contents, ok1 := sofa.Extra["archive_contents_bytes"].(int64)
	catalog, ok2 := sofa.Extra["archive_catalog_bytes"].(int64)
	framing, ok3 := sofa.Extra["archive_framing_bytes"].(int64)
	if !ok1 || !ok2 || !ok3 {
		return
	}
	t.note("archive: members' contents %d B, manifest + index + footer %d B, tar headers, checksum records and padding %d B", contents, catalog, framing)
	if couchbackup.OK && couchbackup.GzipBytes > 0 {
		t.note("  contents alone / couchbackup gzipped = %s; contents + manifest / couchbackup gzipped = %s",
			ratio(contents, couchbackup.GzipBytes), ratio(contents+catalog, couchbackup.GzipBytes))
	}
}
