package archive

import (
	"context"
	"runtime"

	"github.com/klauspost/compress/zstd"
)

// MaxChunkWorkers caps Options.ChunkWorkers: each worker holds a zstd
// encoder at SpeedBestCompression (about 38 MiB of match tables and
// window), a raw chunk and its compressed form.
const MaxChunkWorkers = 4

// chunkPool compresses doc chunks off the replication engine's path. At
// most cap(slots) chunks of the whole archive are held at once, from the
// moment a database hands one over until it is written to the stream (or
// spool): WriteDocs waits for a free slot, so memory stays bounded however
// fast the source is. Each slot owns at most one encoder, created on first
// use and kept for the archive's life.
//
// Chunk buffers are recycled: a database's next pending buffer is one whose
// chunk was compressed, and compressed bytes are written from buffers
// reused once written, so the garbage made per chunk stays small.
type chunkPool struct {
	codec Compression
	size  int // chunk size: buffers are allocated with room for size+size/4
	slots chan struct{}
	encs  chan *zstd.Encoder // idle encoders, at most cap(slots)
	fast  chan *zstd.Encoder // idle SpeedDefault encoders (packs' plain frames)
	raw   chan []byte        // idle pending-record buffers
	out   chan []byte        // idle compressed-chunk buffers
}

// defaultChunkWorkers leaves half the CPUs to the replication engine and
// the source (a local CouchDB often shares the machine).
func defaultChunkWorkers() int { return runtime.GOMAXPROCS(0) / 2 }

func newChunkPool(c Compression, size, workers int) *chunkPool {
	if workers <= 0 {
		workers = defaultChunkWorkers()
	}
	workers = max(1, min(workers, MaxChunkWorkers))
	return &chunkPool{codec: c, size: size, slots: make(chan struct{}, workers),
		encs: make(chan *zstd.Encoder, workers), fast: make(chan *zstd.Encoder, workers), raw: make(chan []byte, workers), out: make(chan []byte, workers)}
}

// buffer returns an empty buffer for pending records.
func (p *chunkPool) buffer() []byte {
	select {
	case b := <-p.raw:
		return b
	default:
		return make([]byte, 0, p.size+p.size/4)
	}
}

// recycle keeps an unused buffer (raw or compressed) for reuse, unless the
// pool has enough or it grew beyond a chunk (a revision larger than the
// chunk size).
func (p *chunkPool) recycle(b []byte, raw bool) {
	if b == nil || cap(b) > p.size+p.size/4 {
		return
	}
	to := p.out
	if raw {
		to = p.raw
	}
	select {
	case to <- b[:0]:
	default:
	}
}

// acquire takes a slot; it fails only when ctx is done first.
func (p *chunkPool) acquire(ctx context.Context) error {
	select {
	case p.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release frees a slot taken with acquire.
func (p *chunkPool) release() { <-p.slots }

// compress returns raw compressed with the pool's codec (zstd at
// SpeedBestCompression), in a buffer to recycle once written. The caller
// holds a slot, so at most cap(slots) encoders ever exist.
func (p *chunkPool) compress(raw []byte) []byte {
	if p.codec != Zstd {
		return compress(p.codec, nil, raw)
	}
	var e *zstd.Encoder
	select {
	case e = <-p.encs:
	default:
		e = newZstdEncoder(zstd.SpeedBestCompression)
	}
	var out []byte
	select {
	case out = <-p.out:
	default:
	}
	out = e.EncodeAll(raw, out)
	p.encs <- e
	return out
}

// close drops the idle encoders.
func (p *chunkPool) close() {
	for _, c := range []chan *zstd.Encoder{p.encs, p.fast} {
		for done := false; !done; {
			select {
			case e := <-c:
				_ = e.Close()
			default:
				done = true
			}
		}
	}
}
