package archive

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Whose turn the archive's stream is. One database at a time owns it and
// writes its members straight through; the others spool theirs. The
// stream is kept busy: when the owner closes, the spools of the
// databases closed meanwhile are appended, and the open database with
// the largest spool becomes the owner at once (promoteLocked), its spool
// appended first. With Options.SpoolAhead, databases that would spool
// more wait before their next batch (DBWriter.Pace): the owner then gets
// the source's whole read rate, and a slow stream (an upload) carries
// data while the source is read instead of after it.

// turnChan is the channel closed at the next change of turn.
func (w *Writer) turnChan() chan struct{} {
	w.turnMu.Lock()
	defer w.turnMu.Unlock()
	if w.turn == nil {
		w.turn = make(chan struct{})
	}
	return w.turn
}

// wake tells the databases waiting in Pace that the turn changed.
func (w *Writer) wake() {
	w.turnMu.Lock()
	if w.turn != nil {
		close(w.turn)
		w.turn = nil
	}
	w.turnMu.Unlock()
}

// setOwnerLocked makes d (nil: none) the stream's owner (w.mu held).
func (w *Writer) setOwnerLocked(d *DBWriter) {
	w.owner = d
	w.ownerNow.Store(d)
	w.wake()
}

// finishDB is called by a closed DBWriter (direct: it owned the stream):
// its group is complete in the stream, or spooled and ready to be
// appended.
func (w *Writer) finishDB(d *DBWriter, sum DBSummary, direct bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.open, d)
	d.summary = sum
	refs := make([][32]byte, 0, len(d.blobs))
	for k := range d.blobs {
		refs = append(refs, k)
	}
	w.ix.refs[d.dir] = refs
	switch {
	case direct:
		w.summaries = append(w.summaries, sum)
		w.setOwnerLocked(nil)
		for len(w.queue) > 0 {
			q := w.queue[0]
			w.queue = w.queue[1:]
			_ = w.appendSpoolLocked(q)
		}
		w.parking.reset()
		w.promoteLocked()
		return w.err
	case w.owner != nil:
		w.queue = append(w.queue, d)
		w.waitInLineLocked(d)
		return w.err
	}
	return w.appendSpoolLocked(d)
}

// appendSpoolLocked copies the spooled group of a closed database into
// tw (see copySpoolLocked), its end member rewritten with the counts of
// the blobs dropped.
func (w *Writer) appendSpoolLocked(d *DBWriter) error {
	defer d.removeSpool()
	if d.held {
		d.held = false
		w.held--
	}
	defer func() { d.parked = nil }()
	if w.err != nil {
		return w.err
	}
	sum := d.summary
	err := w.copySpoolLocked(d, func(drop dropped) ([]byte, error) {
		sum.Blobs -= drop.blobs
		sum.BlobBytes -= drop.raw
		sum.StoredBytes -= drop.stored
		return d.endJSON(sum)
	})
	if err != nil {
		return err
	}
	w.summaries = append(w.summaries, sum)
	return nil
}

// promoteLocked makes the open database with the largest spool the
// stream's owner (w.mu held, no owner): its spool is appended and its
// next members go straight into the stream. A database that is closing
// is not promoted (it waits in line as before); with none open, the next
// one opened owns the stream.
func (w *Writer) promoteLocked() {
	if w.err != nil {
		return
	}
	skip := map[*DBWriter]bool{}
	for {
		var best *DBWriter
		for d := range w.open {
			if !skip[d] && (best == nil || d.spooled.Load() > best.spooled.Load()) {
				best = d
			}
		}
		if best == nil {
			return
		}
		best.spoolMu.Lock()
		if best.closing || best.direct {
			best.spoolMu.Unlock()
			skip[best] = true
			continue
		}
		var err error
		if best.stw != nil {
			if err = best.stw.Flush(); err != nil {
				err = w.fail(fmt.Errorf("archive: spool of %q: %w", best.name, err))
			} else {
				// No end member yet: the counts of dropped blobs go to
				// the group's counters, which its end member will sum.
				err = w.copySpoolLocked(best, nil)
			}
			best.removeSpool()
			best.stw = nil
		}
		best.direct = true
		best.spoolMu.Unlock()
		if err == nil {
			w.setOwnerLocked(best)
		}
		return
	}
}

// dropped counts the blobs a spool copy left out (committed meanwhile by
// another group): their number, raw and stored bytes.
type dropped struct{ blobs, raw, stored int64 }

// copySpoolLocked copies d's spool into tw, dropping blobs that another
// group committed meanwhile and checking every member's checksum on the
// way (the spool is on local disk). end gives the new content of the
// group's end member from what was dropped; with end nil (the group is
// still open: no end member yet) the drops are taken off d's counters.
// The spool's bytes leave the count Pace looks at.
func (w *Writer) copySpoolLocked(d *DBWriter, end func(dropped) ([]byte, error)) error {
	defer func() {
		w.spooled.Add(-d.spooled.Swap(0))
		w.wake()
	}()
	var src io.ReadSeeker = d.parked
	if d.parked == nil {
		if d.spool == nil {
			return w.fail(fmt.Errorf("archive: spool of %q: missing", d.name))
		}
		src = d.spool
	}
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		return w.fail(fmt.Errorf("archive: spool of %q: %w", d.name, err))
	}
	var drop dropped
	tr := tar.NewReader(src)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return w.fail(fmt.Errorf("archive: spool of %q: %w", d.name, err))
		}
		p, perr := parseName(h.Name)
		if perr != nil {
			return w.fail(perr)
		}
		if p.kind == kindBlob && w.hdr.Version < 3 {
			// (version 3 keeps a blob stored twice: its group's end
			// member may be inside a pack, which is not rewritten)
			if _, dup := w.committed[p.sum]; dup {
				rawSize, _ := strconv.ParseInt(h.PAXRecords[paxRawSize], 10, 64)
				drop.blobs++
				drop.raw += rawSize
				drop.stored += h.Size
				continue
			}
		}
		if p.kind == kindEnd && end != nil {
			// the end member carries the final summary, blobs dropped
			// above included: rewrite it.
			raw, err := end(drop)
			if err != nil {
				return w.fail(err)
			}
			s := sha256.Sum256(raw)
			if err := w.writeMemberLocked(h.Name, raw, int64(len(raw)), s, s); err != nil {
				return err
			}
			continue
		}
		start, err := w.offsetLocked()
		if err != nil {
			return w.fail(fmt.Errorf("archive: write %q: %w", h.Name, err))
		}
		if err := w.tw.WriteHeader(w.streamHeader(h)); err != nil {
			return w.fail(fmt.Errorf("archive: write %q: %w", h.Name, err))
		}
		hs := sha256.New()
		n, err := io.Copy(io.MultiWriter(w.tw, hs), tr)
		if err != nil {
			return w.fail(fmt.Errorf("archive: write %q: %w", h.Name, err))
		}
		if err := w.noteSpanLocked(h.Name, start); err != nil {
			return err
		}
		var got [32]byte
		hs.Sum(got[:0])
		if hex.EncodeToString(got[:]) != h.PAXRecords[paxSHA256] {
			return w.fail(memberErr(h.Name, ErrChecksum, "spool file changed on disk"))
		}
		var rawSum [32]byte
		_, _ = hex.Decode(rawSum[:], []byte(h.PAXRecords[paxRawSHA256]))
		rawSize, _ := strconv.ParseInt(h.PAXRecords[paxRawSize], 10, 64)
		if err := w.noteMemberLocked(h.Name, n, rawSize, got, rawSum); err != nil {
			return err
		}
	}
	if end == nil {
		d.nblobs.Add(-drop.blobs)
		d.blobBytes.Add(-drop.raw)
		d.storedBytes.Add(-drop.stored)
	}
	return nil
}
