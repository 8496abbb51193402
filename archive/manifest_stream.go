package archive

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"

	"github.com/klauspost/compress/zstd"
)

// manifestStream reads a manifest member's content as a stream: format
// version 3 compresses it (manifest.json.zst), versions 1 and 2 do not
// (manifest.json). stored hashes its bytes as stored, raw its JSON; JSON
// is what parseManifest reads, at most limit bytes.
type manifestStream struct {
	stored, raw hash.Hash
	src         *errReader // the member's bytes from the tar stream
	body        io.Reader  // src, hashed into stored
	JSON        io.Reader
	dec         *zstd.Decoder
}

func openManifest(r io.Reader, limit int64, c Compression) (*manifestStream, error) {
	s := &manifestStream{stored: sha256.New(), raw: sha256.New(), src: &errReader{r: r}}
	s.body = io.TeeReader(io.LimitReader(s.src, limit), s.stored)
	src := s.body
	if c == Zstd {
		dec, err := zstd.NewReader(s.body, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(maxZstdWindow))
		if err != nil {
			return nil, err
		}
		s.dec, src = dec, dec
	}
	s.JSON = io.TeeReader(io.LimitReader(src, limit), s.raw)
	return s, nil
}

// drain reads what the parser left, so that both checksums cover the
// whole member. ioErr is the archive's bytes failing to arrive (cut
// short, a storage error: for dataErr); a compressed manifest whose
// bytes do not decode is ErrChecksum.
func (s *manifestStream) drain(name string) (ioErr, err error) {
	_, jerr := io.Copy(io.Discard, s.JSON)
	if s.dec != nil {
		s.dec.Close()
	}
	if _, berr := io.Copy(io.Discard, s.body); berr != nil {
		return berr, nil
	}
	if s.src.err != nil {
		return s.src.err, nil
	}
	if jerr != nil {
		return nil, memberErr(name, ErrChecksum, "its bytes do not decode: damaged ("+jerr.Error()+")")
	}
	return nil, nil
}

// check checks the stored bytes against sum and, for a compressed
// manifest, the JSON against rawSum.
func (s *manifestStream) check(name, sum, rawSum string) error {
	if err := checkStoredSum(name, s.stored, sum); err != nil {
		return err
	}
	if s.dec != nil && hex.EncodeToString(s.raw.Sum(nil)) != rawSum {
		return memberErr(name, ErrChecksum, "uncompressed bytes do not match the SHA-256 in its tar header")
	}
	return nil
}

// errReader keeps the first error of the reader under it.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// readManifest streams the manifest member's content from the tar stream
// (never held whole), checks its checksums (sum: of its bytes as stored;
// rawSum: of its JSON, when compressed) and parses it.
func (r *Reader) readManifest(name string, c Compression, sum, rawSum string) (Manifest, memberList, error) {
	ms, err := openManifest(r.tr, r.opts.MaxMemberSize, c)
	if err != nil {
		return Manifest{}, memberList{}, err
	}
	man, listed, perr := parseManifest(ms.JSON)
	// read what the parser left, so the checksums cover the whole member
	if ioErr, err := ms.drain(name); ioErr != nil {
		return Manifest{}, memberList{}, r.dataErr(name, ioErr)
	} else if err != nil {
		return Manifest{}, memberList{}, err
	}
	if err := ms.check(name, sum, rawSum); err != nil {
		return Manifest{}, memberList{}, err
	}
	if perr != nil {
		return Manifest{}, memberList{}, memberErr(name, ErrFormat, perr.Error())
	}
	return man, listed, nil
}
