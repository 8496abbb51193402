package archive

import (
	"context"
	"sync"

	"github.com/sofadb/sofa/replicate"
)

// blobBufs holds buffers for compressed blobs, reused from one blob to
// the next (up to maxPooledBlob bytes each).
var blobBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBlob = 4 << 20

// blobWait lets writers referencing a blob another goroutine is still
// writing wait for it, so a blob always precedes its first reference.
type blobWait struct {
	done chan struct{}
	err  error
}

var doneBlob = func() *blobWait { b := &blobWait{done: make(chan struct{})}; close(b.done); return b }()

// ensureBlob writes a's bytes as blob member sum unless this group or the
// archive already holds them; it returns once the blob is in the stream
// (or spool), or in the group's next pack (format version 3), so a record
// referencing it may follow.
func (d *DBWriter) ensureBlob(sum [32]byte, a *replicate.Attachment) error {
	d.mu.Lock()
	if b, ok := d.blobs[sum]; ok {
		d.mu.Unlock()
		<-b.done
		return b.err
	}
	b := &blobWait{done: make(chan struct{})}
	d.blobs[sum] = b
	d.mu.Unlock()

	switch {
	case d.w.isCommitted(sum):
		b.err = nil
	case d.packs() && len(a.Data) <= packBlobMax:
		plain := a.Encoding != "" || compressedType(a.ContentType) || !compressible(a.Data)
		b.err = d.packBlob(context.Background(), sum, a.Data, plain)
	default:
		if d.packs() {
			if b.err = d.beforeOwnBlob(context.Background()); b.err != nil {
				break
			}
		}
		codec := d.w.opts.Compression
		var stored, comp []byte
		var buf *[]byte
		try := codec != None && a.Encoding == "" && !compressedType(a.ContentType) && compressible(a.Data)
		if try {
			buf = blobBufs.Get().(*[]byte)
			comp = compress(codec, (*buf)[:0], a.Data)
			stored = comp
		}
		if !try || len(stored) >= len(a.Data) {
			codec, stored = None, a.Data // already compressed, or incompressible
		}
		b.err = d.emit(blobName(sum, codec), stored, int64(len(a.Data)), sum, codec == None)
		// Compressing an attachment (often an incompressible one: an
		// image, an archive) makes megabytes of output: the buffer is
		// reused from blob to blob, once emit has copied it.
		if buf != nil && cap(comp) <= maxPooledBlob {
			*buf = comp[:0]
			blobBufs.Put(buf)
		}
		if b.err == nil {
			d.nblobs.Add(1)
			d.blobBytes.Add(int64(len(a.Data)))
		}
	}
	close(b.done)
	d.mu.Lock()
	if b.err == nil {
		d.blobs[sum] = doneBlob // drop the channel, keep the key
	}
	d.mu.Unlock()
	return b.err
}
