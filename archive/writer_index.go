package archive

// The writer's account of where members are (the index, footer.json) and
// what they hold (manifest.json), written after the last database.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/klauspost/compress/zstd"
)

// offsetLocked is the offset of the next member: what tw wrote, with the
// padding of the member before it.
func (w *Writer) offsetLocked() (int64, error) {
	if err := w.tw.Flush(); err != nil {
		return 0, err
	}
	return w.cw.n, nil
}

// noteSpanLocked tells the index that member name, written whole, began
// at start.
func (w *Writer) noteSpanLocked(name string, start int64) error {
	end, err := w.offsetLocked()
	if err != nil {
		return w.fail(fmt.Errorf("archive: write %q: %w", name, err))
	}
	w.ix.member(name, start, end)
	for _, inner := range w.packs[name].names {
		w.ix.member(inner, start, end) // the group's start or end, a blob: at the pack
	}
	return nil
}

// writeIndexLocked writes index.json and footer.json after the manifest
// (see index.go); the footer is the last FooterSize bytes before the tar
// trailer.
func (w *Writer) writeIndexLocked() error {
	raw, err := w.ix.encode(w.summaries)
	if err != nil {
		return err
	}
	stored := compress(Gzip, nil, raw)
	rawSum, sum := sha256.Sum256(raw), sha256.Sum256(stored)
	if err := w.tw.WriteHeader(w.tarHeader(indexName, int64(len(stored)), int64(len(raw)), sum, rawSum)); err != nil {
		return fmt.Errorf("archive: write %s: %w", indexName, err)
	}
	at := w.cw.n // tw writes headers through at once
	if _, err := w.tw.Write(stored); err != nil {
		return fmt.Errorf("archive: write %s: %w", indexName, err)
	}
	f, err := footer{Format: FooterFormat, Version: tocVersion, ID: w.hdr.ID,
		IndexOffset: at, IndexSize: int64(len(stored)), IndexSHA256: hex.EncodeToString(sum[:]), IndexRawSize: int64(len(raw))}.encode()
	if err != nil {
		return err
	}
	fsum := sha256.Sum256(f)
	if err := w.tw.WriteHeader(w.tarHeader(footerName, FooterSize, FooterSize, fsum, fsum)); err != nil {
		return fmt.Errorf("archive: write %s: %w", footerName, err)
	}
	if _, err := w.tw.Write(f); err != nil {
		return fmt.Errorf("archive: write %s: %w", footerName, err)
	}
	return nil
}

// noteMemberLocked records a member written to tw in the manifest list.
func (w *Writer) noteMemberLocked(name string, size, rawSize int64, sum, rawSum [32]byte) error {
	if p, err := parseName(name); err == nil && p.kind == kindBlob {
		w.committed[p.sum] = struct{}{}
		w.totals.Blobs++
	}
	for _, sum := range w.packs[name].blobs {
		w.committed[sum] = struct{}{}
		w.totals.Blobs++
	}
	delete(w.packs, name)
	e, _ := json.Marshal(MemberInfo{
		Name: name, Size: size, SHA256: hex.EncodeToString(sum[:]),
		RawSize: rawSize, RawSHA256: hex.EncodeToString(rawSum[:]),
	})
	if w.totals.Members > 0 {
		e = append([]byte(",\n"), e...)
	}
	if _, err := w.members.Write(e); err != nil {
		return w.fail(fmt.Errorf("archive: manifest: %w", err))
	}
	w.totals.Members++
	w.totals.StoredBytes += size
	w.totals.RawBytes += rawSize
	return nil
}

// isCommitted reports whether a blob is already in the tar stream.
func (w *Writer) isCommitted(sum [32]byte) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.committed[sum]
	return ok
}

// writeManifestLocked writes manifest.json: a prefix with databases and
// totals, then the member list streamed from the spill buffer.
func (w *Writer) writeManifestLocked() error {
	sort.Slice(w.summaries, func(i, j int) bool { return w.summaries[i].Name < w.summaries[j].Name })
	w.totals.Databases = len(w.summaries)
	for _, s := range w.summaries {
		w.totals.Revisions += s.Revisions
	}
	dbs := w.summaries
	if dbs == nil {
		dbs = []DBSummary{}
	}
	head, err := json.Marshal(struct {
		Format    string      `json:"format"`
		Version   int         `json:"version"`
		ID        string      `json:"id"`
		Databases []DBSummary `json:"databases"`
		Totals    Totals      `json:"totals"`
	}{FormatName, w.hdr.Version, w.hdr.ID, dbs, w.totals})
	if err != nil {
		return fmt.Errorf("archive: manifest: %w", err)
	}
	head = append(head[:len(head)-1], `,"members":[`...)
	tail := []byte("]}\n")
	r, err := w.members.reader()
	if err != nil {
		return err
	}
	content := io.MultiReader(bytes.NewReader(head), r, bytes.NewReader(tail))
	size := int64(len(head)) + w.members.size + int64(len(tail))
	if w.hdr.Version >= 3 {
		return w.writeManifestZstdLocked(content, size)
	}
	h := sha256.New()
	if _, err := io.Copy(h, content); err != nil {
		return fmt.Errorf("archive: manifest: %w", err)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	start, err := w.offsetLocked()
	if err != nil {
		return fmt.Errorf("archive: write manifest: %w", err)
	}
	if err := w.tw.WriteHeader(w.tarHeader(manifestName, size, size, sum, sum)); err != nil {
		return fmt.Errorf("archive: write manifest: %w", err)
	}
	if r, err = w.members.reader(); err != nil {
		return err
	}
	if _, err := io.Copy(w.tw, io.MultiReader(bytes.NewReader(head), r, bytes.NewReader(tail))); err != nil {
		return fmt.Errorf("archive: write manifest: %w", err)
	}
	return w.noteSpanLocked(manifestName, start)
}

// writeManifestZstdLocked writes the manifest compressed (format version
// 3: manifest.json.zst), its rawSize bytes of JSON read from content. The
// compressed bytes are spilled to a temporary file past 1 MiB (a fleet's
// manifest can be large), as its member list is.
func (w *Writer) writeManifestZstdLocked(content io.Reader, rawSize int64) error {
	name := manifestName + Zstd.ext()
	out := spillBuffer{dir: w.opts.TempDir, limit: 1 << 20}
	defer out.close()
	rawHash, storedHash := sha256.New(), sha256.New()
	// SpeedDefault: a streaming encoder at the best level holds 34 MiB of
	// tables, for a manifest a few percent smaller
	enc, err := zstd.NewWriter(io.MultiWriter(&out, storedHash), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true),
		zstd.WithWindowSize(zstdWindow), zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(true))
	if err != nil {
		return fmt.Errorf("archive: manifest: %w", err)
	}
	if _, err := io.Copy(enc, io.TeeReader(content, rawHash)); err != nil {
		return fmt.Errorf("archive: manifest: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("archive: manifest: %w", err)
	}
	var sum, rawSum [32]byte
	storedHash.Sum(sum[:0])
	rawHash.Sum(rawSum[:0])
	start, err := w.offsetLocked()
	if err != nil {
		return fmt.Errorf("archive: write manifest: %w", err)
	}
	if err := w.tw.WriteHeader(w.tarHeader(name, out.size, rawSize, sum, rawSum)); err != nil {
		return fmt.Errorf("archive: write manifest: %w", err)
	}
	r, err := out.reader()
	if err != nil {
		return err
	}
	if _, err := io.Copy(w.tw, r); err != nil {
		return fmt.Errorf("archive: write manifest: %w", err)
	}
	return w.noteSpanLocked(name, start)
}
