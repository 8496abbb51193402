package archive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// declaredSize is the uncompressed size a member without SOFA records
// (format version 3, see selfChecking) declares: a blob stored as is, its
// stored size; a zstd member, the sum of its frames' content sizes, or -1
// when a frame does not say (tiny ones; the decoder then stops at limit).
// Every frame but an empty one must carry a content checksum, which the
// decoder checks. More than limit is ErrTooLarge.
func declaredSize(name string, c Compression, stored []byte, limit int64) (int64, error) {
	if c == None {
		return int64(len(stored)), nil
	}
	if c != Zstd {
		return 0, memberErr(name, ErrFormat, "tar header lacks the SOFA checksum records")
	}
	var total uint64
	known := true
	in := stored
	for len(in) > 0 {
		var h zstd.Header
		rest, err := h.DecodeAndStrip(in)
		if err != nil || h.Skippable || h.DictionaryID != 0 {
			return 0, memberErr(name, ErrFormat, "not a zstd frame where one should start")
		}
		empty := h.HasFCS && h.FrameContentSize == 0
		if !h.HasCheckSum && !empty {
			return 0, memberErr(name, ErrFormat, "a zstd frame without a content checksum")
		}
		known = known && h.HasFCS
		if total += h.FrameContentSize; total > uint64(limit) || h.FrameContentSize > uint64(limit) {
			return 0, memberErr(name, ErrTooLarge, fmt.Sprintf("declares more than %d bytes uncompressed", limit))
		}
		if in, err = skipBlocks(rest, h.HasCheckSum); err != nil {
			return 0, memberErr(name, ErrFormat, "zstd: "+err.Error())
		}
	}
	if !known {
		return -1, nil
	}
	return int64(total), nil
}

// damaged turns a format error of a member whose bytes check themselves
// (no SOFA records: a zstd frame, a blob named by its hash) into the
// checksum error it is: its bytes changed. ErrTooLarge stays.
func damaged(err error) error {
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrFormat) {
		return err
	}
	detail := "its bytes do not decode: damaged"
	var d *detailErr
	if errors.As(e.Err, &d) {
		detail += " (" + d.detail + ")"
	}
	return memberErr(e.Member, ErrChecksum, detail)
}

// skipBlocks passes over a zstd frame's blocks and its content checksum
// when it has one (RFC 8878, 3.1.1.2), returning what follows the frame.
func skipBlocks(in []byte, checksum bool) ([]byte, error) {
	for {
		if len(in) < 3 {
			return nil, errors.New("frame cut short")
		}
		bh := uint32(in[0]) | uint32(in[1])<<8 | uint32(in[2])<<16
		last, typ, size := bh&1 == 1, (bh>>1)&3, int(bh>>3)
		switch typ {
		case 1: // RLE: one byte repeated size times
			size = 1
		case 3:
			return nil, errors.New("reserved block type")
		}
		if len(in) < 3+size {
			return nil, errors.New("frame cut short")
		}
		in = in[3+size:]
		if last {
			break
		}
	}
	if !checksum {
		return in, nil
	}
	if len(in) < 4 {
		return nil, errors.New("frame cut short")
	}
	return in[4:], nil
}

// unpack turns a pack member (format version 3), read and checked whole,
// into its members, which readMember returns next, in order, before it
// reads on: the first now. Each is a group member as version 2 stores it
// (meta.json, a blob, a doc chunk, end.json), uncompressed, of the pack's
// database (a blob, of any); its name in errors is the pack's with its
// own. The pack lay at start (its first header) to data+size; the index
// is checked against that span for the group's start and end and the
// blobs it holds.
func (r *Reader) unpack(pk *member, start, data, size int64) (*member, error) {
	if r.groupStored == nil {
		r.groupStored = map[string]int64{}
	}
	r.groupStored[pk.p.dir] += size
	tr := tar.NewReader(bytes.NewReader(pk.raw))
	var out []*member
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, r.fail(memberErr(pk.name, ErrFormat, "its tar: "+err.Error()))
		}
		name := fmt.Sprintf("%s (%s)", pk.name, h.Name)
		p, err := parseName(h.Name)
		if err != nil {
			return nil, r.fail(memberErr(name, ErrUnsafeName, ""))
		}
		switch {
		case h.Typeflag != tar.TypeReg:
			return nil, r.fail(memberErr(name, ErrFormat, fmt.Sprintf("tar entry type %q is not a regular file", h.Typeflag)))
		case p.codec != None:
			return nil, r.fail(memberErr(name, ErrFormat, "a member of a pack is not compressed on its own"))
		case p.kind == kindBlob:
		case (p.kind == kindMeta || p.kind == kindChunk || p.kind == kindEnd) && p.dir == pk.p.dir:
		default:
			return nil, r.fail(memberErr(name, ErrFormat, "not a member of the pack's database group"))
		}
		raw, err := io.ReadAll(tr) // within the pack's checked bytes
		if err != nil {
			return nil, r.fail(memberErr(name, ErrFormat, "its tar: "+err.Error()))
		}
		sum := sha256.Sum256(raw)
		if p.kind == kindBlob {
			if sum != p.sum {
				return nil, r.fail(memberErr(name, ErrChecksum, "blob bytes do not match the SHA-256 in its name"))
			}
			r.blobMembers++
		}
		if r.sp != nil {
			r.sp.member(p, start, data, size) // at the pack
		}
		hexSum := hex.EncodeToString(sum[:])
		out = append(out, &member{name: name, p: p, raw: raw, sum: hexSum, rawSum: hexSum, rawSize: int64(len(raw))})
	}
	if len(out) == 0 {
		return nil, r.fail(memberErr(pk.name, ErrFormat, "an empty pack"))
	}
	r.pending = out[1:]
	return out[0], nil
}
