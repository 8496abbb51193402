package archive

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Compression names how members are compressed. Each member is compressed
// on its own (one zstd frame or one gzip stream), so members can be
// checked, extracted and decompressed one by one with standard tools.
type Compression string

const (
	// Zstd is the default: zstd frames with content checksums, 4 MiB
	// window (`zstd -d` reads them).
	Zstd Compression = "zstd"
	// Gzip is RFC 1952 gzip (`gunzip` reads it).
	Gzip Compression = "gzip"
	// None stores members as they are.
	None Compression = "none"
)

// ParseCompression maps "zstd", "gzip" (or "gz") and "none" to a
// Compression; "" means Zstd.
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "", "zstd", "zst":
		return Zstd, nil
	case "gzip", "gz":
		return Gzip, nil
	case "none":
		return None, nil
	}
	return "", fmt.Errorf("archive: unknown compression %q (want zstd, gzip or none)", s)
}

func (c Compression) ext() string {
	switch c {
	case Zstd:
		return ".zst"
	case Gzip:
		return ".gz"
	}
	return ""
}

// zstd doc chunks are compressed at SpeedBestCompression (about zstd level
// 11): 11% smaller than SpeedBetterCompression on JSON documents, at a
// quarter of the speed (50-60 MB/s on one core), so a chunkPool runs them
// off the replication engine's path. Blobs and gzip members use compress:
// zstd at SpeedBetterCompression (about level 7), since a record waits for
// its blobs.
//
// zstdWindow is the encoder window. Doc chunks are about this size, so a
// chunk is compressed against itself in full.
const zstdWindow = 4 << 20

// maxZstdWindow is the largest window a reader accepts: it bounds decoder
// memory whatever a crafted frame header asks for.
const maxZstdWindow = 16 << 20

var zstdEncoders = sync.Pool{New: func() any { return newZstdEncoder(zstd.SpeedBetterCompression) }}

func newZstdEncoder(l zstd.EncoderLevel) *zstd.Encoder {
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderConcurrency(1),
		zstd.WithLowerEncoderMem(true),
		zstd.WithWindowSize(zstdWindow),
		zstd.WithEncoderLevel(l),
		zstd.WithEncoderCRC(true))
	if err != nil {
		panic(err) // options are constant and valid
	}
	return e
}

var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(io.Discard, gzip.DefaultCompression)
	return w
}}

// compress appends raw, compressed with c, to dst: zstd at
// SpeedBetterCompression, gzip at its default level. Safe for concurrent
// use: every call takes its own encoder from a pool.
func compress(c Compression, dst, raw []byte) []byte {
	switch c {
	case Zstd:
		e := zstdEncoders.Get().(*zstd.Encoder)
		// EncodeAll appends block by block: a blob of megabytes would
		// grow dst by doubling, several times its size in garbage.
		dst = slices.Grow(dst, e.MaxEncodedSize(len(raw)))
		dst = e.EncodeAll(raw, dst)
		zstdEncoders.Put(e)
		return dst
	case Gzip:
		buf := bytes.NewBuffer(dst)
		w := gzipWriters.Get().(*gzip.Writer)
		w.Reset(buf)
		_, _ = w.Write(raw) // writes to a bytes.Buffer do not fail
		_ = w.Close()
		gzipWriters.Put(w)
		return buf.Bytes()
	}
	return append(dst, raw...)
}

// decoders holds one decoder per codec for a sequential reader.
type decoders struct {
	zstd *zstd.Decoder
	gzip *gzip.Reader
}

func (d *decoders) close() {
	if d.zstd != nil {
		d.zstd.Close()
	}
}

// decompress returns stored decompressed with c. The result must be exactly
// rawSize bytes: decoding stops as soon as it would exceed rawSize (a bomb
// is cut off within a block past rawSize), and memory used is rawSize plus
// the decoder's bounded window (gzip) or nothing more (zstd, which decodes
// into the result itself, its history included: no copy out of a sliding
// window, the most of a chunk's CPU when it was read as a stream).
func (d *decoders) decompress(member string, c Compression, stored []byte, rawSize int64) ([]byte, error) {
	switch c {
	case None:
		if int64(len(stored)) != rawSize {
			return nil, memberErr(member, ErrFormat, fmt.Sprintf("size %d, declared %d", len(stored), rawSize))
		}
		return stored, nil
	case Zstd:
		return d.unzstd(member, stored, rawSize)
	case Gzip:
		if d.gzip == nil {
			d.gzip = new(gzip.Reader)
		}
		if err := d.gzip.Reset(bytes.NewReader(stored)); err != nil {
			return nil, memberErr(member, ErrFormat, "gzip: "+err.Error())
		}
		d.gzip.Multistream(false)
		return readDeclared(member, c, d.gzip, rawSize)
	}
	return nil, memberErr(member, ErrFormat, "unknown compression "+string(c))
}

// zstdSlack is the room past rawSize a zstd decode may use before it is
// cut off (the decoder writes whole sequences, a few bytes past the end).
const zstdSlack = 64

// unzstd decodes every zstd frame of stored into one buffer of rawSize
// (plus zstdSlack) bytes, refusing a frame that declares or decodes to more.
func (d *decoders) unzstd(member string, stored []byte, rawSize int64) ([]byte, error) {
	if d.zstd == nil {
		z, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(maxZstdWindow),
			zstd.WithDecodeAllCapLimit(true))
		if err != nil {
			return nil, err
		}
		d.zstd = z
	}
	out, err := d.zstd.DecodeAll(stored, make([]byte, 0, rawSize+zstdSlack))
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded) || int64(len(out)) > rawSize:
		return nil, memberErr(member, ErrTooLarge, fmt.Sprintf("decompresses to more than the declared %d bytes", rawSize))
	case err != nil:
		return nil, memberErr(member, ErrFormat, "zstd: "+err.Error())
	case int64(len(out)) != rawSize:
		return nil, memberErr(member, ErrFormat, fmt.Sprintf("decompresses to %d bytes, declared %d", len(out), rawSize))
	}
	return out[:rawSize:rawSize], nil
}

// zstdSize decodes the zstd frames of stored as a stream into nothing,
// refusing more than limit bytes, and returns their size: for frames that
// do not declare theirs, which are then decoded into a buffer of exactly
// that size (memory: the size and a window, as for a declared one).
func zstdSize(member string, stored []byte, limit int64) (int64, error) {
	z, err := zstd.NewReader(bytes.NewReader(stored),
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(maxZstdWindow))
	if err != nil {
		return 0, memberErr(member, ErrFormat, "zstd: "+err.Error())
	}
	defer z.Close()
	n, err := io.Copy(io.Discard, io.LimitReader(z, limit+1))
	switch {
	case err != nil:
		return 0, memberErr(member, ErrFormat, "zstd: "+err.Error())
	case n > limit:
		return 0, memberErr(member, ErrTooLarge, fmt.Sprintf("decompresses to more than %d bytes", limit))
	}
	return n, nil
}

// readDeclared reads exactly rawSize bytes from r, a decompressor of
// codec c, and checks that nothing follows.
func readDeclared(member string, c Compression, r io.Reader, rawSize int64) ([]byte, error) {
	out := make([]byte, rawSize)
	n, err := io.ReadFull(r, out)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, memberErr(member, ErrFormat, fmt.Sprintf("decompresses to %d bytes, declared %d", n, rawSize))
		}
		return nil, memberErr(member, ErrFormat, string(c)+": "+err.Error())
	}
	var one [1]byte
	m, err := io.ReadFull(r, one[:])
	if m > 0 {
		return nil, memberErr(member, ErrTooLarge, fmt.Sprintf("decompresses to more than the declared %d bytes", rawSize))
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, memberErr(member, ErrFormat, string(c)+": "+err.Error())
	}
	return out, nil
}
