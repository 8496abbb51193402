package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Format version 3 stores a database group's members in pack members
// (db/<dir>/pack-NNNNNN.tar.zst): each a tar of the members that version 2
// writes one by one (meta.json, small blobs, one doc chunk, end.json),
// uncompressed inside and compressed as a whole. A group of a few
// documents is then one member instead of three or more, and a small
// attachment costs no tar header, checksum records and padding of its
// own (about 1.8 KB each in version 2).
//
// A pack is cut when the group's pending records reach the chunk size,
// when its small blobs reach packBlobCap bytes, and when the group ends.
// Blobs larger than packBlobMax are members of their own, as in version 2.
const (
	// packBlobMax is the largest attachment (bytes) stored in a pack.
	packBlobMax = 64 << 10
	// packBlobCap is the attachment bytes a pack collects before it is
	// cut: with the chunk size, it bounds a pack held in memory.
	packBlobCap = 1 << 20
)

// packInfo is what a pack member holds, for the archive's index and
// manifest: its members' names in order, and the blobs among them.
type packInfo struct {
	names []string
	blobs [][32]byte
}

// packBuf is what a group collected for its next pack (d.mu held).
type packBuf struct {
	names []string
	raws  [][]byte
	// plain marks members whose bytes do not compress (an attachment
	// of a compressed type, or one whose sample did not shrink)
	plain     []bool
	blobs     [][32]byte
	blobBytes int
}

func (b *packBuf) add(name string, raw []byte, plain bool) {
	b.names = append(b.names, name)
	b.raws = append(b.raws, raw)
	b.plain = append(b.plain, plain)
}

// packs reports whether this archive packs members (format version 3).
func (d *DBWriter) packs() bool { return d.w.hdr.Version >= 3 }

// packBlob adds attachment bytes to the group's next pack, copied (the
// engine may reuse them), and cuts the pack once its blobs reach
// packBlobCap. The blob precedes every record that refers to it: those
// go into the pack's doc chunk, or a later one.
func (d *DBWriter) packBlob(ctx context.Context, sum [32]byte, data []byte, plain bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return &Error{Err: ErrClosed}
	}
	d.pk.add(blobName(sum, None), bytes.Clone(data), plain)
	d.pk.blobs = append(d.pk.blobs, sum)
	d.pk.blobBytes += len(data)
	d.nblobs.Add(1)
	d.blobBytes.Add(int64(len(data)))
	if d.pk.blobBytes >= packBlobCap {
		return d.queuePackLocked(ctx, nil)
	}
	return nil
}

// beforeOwnBlob is called before a blob too large for a pack is written
// as a member of its own: the group's first pack (its meta.json) must
// precede it, so that pack is cut and written first.
func (d *DBWriter) beforeOwnBlob(ctx context.Context) error {
	d.mu.Lock()
	if d.npack == 0 {
		if err := d.queuePackLocked(ctx, nil); err != nil {
			d.mu.Unlock()
			return err
		}
	}
	first := d.firstOut
	d.mu.Unlock()
	<-first
	return d.jobError()
}

// queuePackLocked cuts the group's next pack (d.mu held): the members
// collected, the pending records as the next doc chunk, and end (the end
// member's content) when the group ends. Like a doc chunk, it waits for a
// pool slot, is compressed off the caller and written after the pack or
// chunk before it.
func (d *DBWriter) queuePackLocked(ctx context.Context, end []byte) error {
	pool := d.w.pool
	if err := pool.acquire(ctx); err != nil {
		return err
	}
	b := d.pk
	d.pk = packBuf{}
	if len(d.buf) > 0 {
		d.nchunk++
		d.chunks.Add(1)
		d.docBytes.Add(int64(len(d.buf)))
		b.add(chunkName(d.dir, d.nchunk, None), d.buf, false)
		d.buf = nil
		if end == nil {
			d.buf = pool.buffer()
		}
	}
	if end != nil {
		b.add(endName(d.dir), end, false)
	}
	d.npack++
	var first chan struct{}
	if d.npack == 1 {
		first = d.firstOut
	}
	prev, done := d.tail, make(chan struct{})
	d.tail = done
	go d.writePack(d.npack, b, first, prev, done)
	return nil
}

// writePack builds pack number n from b, compresses it, waits until the
// member before it is written (prev closed), writes it and closes done
// (and first, for the group's first pack). It holds a pool slot.
func (d *DBWriter) writePack(n int, b packBuf, first, prev, done chan struct{}) {
	defer close(done)
	defer d.w.pool.release()
	if first != nil {
		defer close(first)
	}
	codec := d.w.opts.Compression
	name := packName(d.dir, n, codec)
	raw, plain, err := packTar(b, d.w.hdr.Created)
	for i, m := range b.names {
		if p, _ := parseName(m); p.kind == kindChunk {
			d.w.pool.recycle(b.raws[i], true)
		}
	}
	if err != nil {
		d.jobFailed(fmt.Errorf("archive: pack %q: %w", name, err))
		return
	}
	rawSize, rawSum := int64(len(raw)), sha256.Sum256(raw)
	stored := raw
	if codec != None {
		stored = d.w.pool.compressPack(raw, plain)
		defer d.w.pool.recycle(stored, false)
	}
	if prev != nil {
		<-prev
	}
	if d.jobError() != nil {
		return // the stream or spool failed already
	}
	d.w.mu.Lock()
	d.w.packs[name] = packInfo{names: b.names, blobs: b.blobs}
	d.w.mu.Unlock()
	if err := d.emit(name, stored, rawSize, rawSum, codec == None); err != nil {
		d.jobFailed(err)
	}
}

// jobFailed records the first error of a chunk or pack job.
func (d *DBWriter) jobFailed(err error) {
	d.jobMu.Lock()
	defer d.jobMu.Unlock()
	if d.jobErr == nil {
		d.jobErr = err
	}
}

// byteRange is a byte range [off, end) of a pack's tar.
type byteRange struct{ off, end int }

// packTar writes b's members as a tar (USTAR headers; PAX only for a name
// too long for them) and returns it with the ranges of the members whose
// bytes do not compress.
func packTar(b packBuf, mtime time.Time) ([]byte, []byteRange, error) {
	size := 1024
	for _, r := range b.raws {
		size += 512 + len(r) + 511
	}
	var buf bytes.Buffer
	buf.Grow(size)
	tw := tar.NewWriter(&buf)
	var plain []byteRange
	for i, name := range b.names {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(b.raws[i])), ModTime: mtime}
		if err := tw.WriteHeader(h); err != nil {
			return nil, nil, err
		}
		at := buf.Len() // WriteHeader wrote the header block through

		if _, err := tw.Write(b.raws[i]); err != nil {
			return nil, nil, err
		}
		if b.plain[i] && len(b.raws[i]) > 0 {
			if n := len(plain); n > 0 && at-plain[n-1].end <= 1024 {
				plain[n-1].end = at + len(b.raws[i]) // one frame: only a tar header between
			} else {
				plain = append(plain, byteRange{at, at + len(b.raws[i])})
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), plain, nil
}

// compressPack compresses a pack's tar with the pool's codec. For zstd,
// the ranges in plain (attachments that do not compress) are frames of
// their own at SpeedDefault, which passes over them at hundreds of MB/s
// where SpeedBestCompression crawls (2.2 MB of PNG images: 4 ms against
// 227 ms, 0.9% larger); the rest, frames at the pool's level. Each pool
// slot keeps one encoder of each level. Concatenated zstd
// frames are one zstd stream (`zstd -d` reads it whole).
func (p *chunkPool) compressPack(raw []byte, plain []byteRange) []byte {
	if p.codec != Zstd || len(plain) == 0 {
		return p.compress(raw)
	}
	var e *zstd.Encoder
	select {
	case e = <-p.encs:
	default:
		e = newZstdEncoder(zstd.SpeedBestCompression)
	}
	defer func() { p.encs <- e }()
	var out []byte
	select {
	case out = <-p.out:
	default:
	}
	var fast *zstd.Encoder
	select {
	case fast = <-p.fast:
	default:
		fast = newZstdEncoder(zstd.SpeedDefault)
	}
	defer func() { p.fast <- fast }()
	at := 0
	for _, r := range plain {
		if r.off > at {
			out = e.EncodeAll(raw[at:r.off], out)
		}
		out = fast.EncodeAll(raw[r.off:r.end], out)
		at = r.end
	}
	if at < len(raw) {
		out = e.EncodeAll(raw[at:], out)
	}
	return out
}
