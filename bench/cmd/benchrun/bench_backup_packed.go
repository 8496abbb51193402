package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// packedLimit is the largest group, in uncompressed bytes, that the packed
// layout estimate puts in one member: a writer holding a group in memory
// until it ends could not afford much more for each database in flight.
const packedLimit = 4 << 20

// packedLayout estimates the size of an archive format that sofa does not
// write (format version 2 stays): the same members' contents, but each
// database group of at most packedLimit uncompressed bytes stored as one
// member (a plain tar of its members, compressed as one zstd frame at the
// level sofa uses), no checksum records in any tar header, the manifest
// compressed, and an index of the members left. It is computed from the
// archive file itself, so the contents are byte for byte sofa's. It
// answers one question: how much of the archive's excess over couchbackup's
// gzipped output a new format version could remove.
func packedLayout(file string) (int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	dec, err := zstd.NewReader(nil)
	if err != nil {
		return 0, err
	}
	defer dec.Close()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithWindowSize(4<<20))
	if err != nil {
		return 0, err
	}
	var (
		total    int64 = 1024 // header.json without checksum records
		group    []packedMember
		kept     []string // names of the members left (a packed group by its first)
		index    []any    // index entries: groups and blob members left
		manifest map[string]any
		entries  = map[string]any{} // the manifest's member entries by name
	)
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
		stored, err := io.ReadAll(tr)
		if err != nil {
			return 0, err
		}
		switch {
		case h.Name == "manifest.json":
			if err := json.Unmarshal(stored, &manifest); err != nil {
				return 0, fmt.Errorf("manifest: %w", err)
			}
			continue
		case !strings.HasPrefix(h.Name, "db/") && !strings.HasPrefix(h.Name, "blob/"):
			continue // header, index, footer: counted apart
		}
		raw := stored
		if strings.HasSuffix(h.Name, ".zst") {
			if raw, err = dec.DecodeAll(stored, nil); err != nil {
				return 0, fmt.Errorf("%s: %w", h.Name, err)
			}
		}
		group = append(group, packedMember{h.Name, stored, raw})
		if !strings.HasSuffix(h.Name, "/end.json") {
			continue
		}
		n, packed, err := packGroup(enc, group)
		if err != nil {
			return 0, err
		}
		at := total
		total += n
		if packed {
			kept = append(kept, group[0].name) // stands for the group's one member
			index = append(index, map[string]any{"offset": at, "end": total})
		} else {
			for _, m := range group {
				kept = append(kept, m.name)
				if strings.HasPrefix(m.name, "blob/") {
					index = append(index, map[string]any{"offset": at, "end": total, "sha256": m.name})
				}
			}
		}
		group = nil
	}
	if manifest == nil {
		return 0, errors.New("no manifest")
	}
	if ms, ok := manifest["members"].([]any); ok {
		for _, m := range ms {
			if e, ok := m.(map[string]any); ok {
				entries[fmt.Sprint(e["name"])] = e
			}
		}
	}
	var left []any
	for _, name := range kept {
		left = append(left, entries[name])
	}
	manifest["members"] = left
	man, err := json.Marshal(manifest)
	if err != nil {
		return 0, err
	}
	idx, err := json.Marshal(map[string]any{"databases": manifest["databases"], "members": index})
	if err != nil {
		return 0, err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(idx)
	_ = zw.Close()
	total += 512 + pad512(int64(len(enc.EncodeAll(man, nil)))) // manifest.json.zst
	total += 512 + pad512(int64(gz.Len()))                     // index.json.gz
	total += 512 + 512 + 1024                                  // footer.json, tar trailer
	return total, nil
}

type packedMember struct {
	name        string
	stored, raw []byte
}

// packGroup is the bytes one group takes in the packed layout: one member
// (a 512-byte header and its padded content) when its uncompressed
// members fit packedLimit, else each member as stored, without checksum
// records.
func packGroup(enc *zstd.Encoder, group []packedMember) (n int64, packed bool, err error) {
	var raw int64
	for _, m := range group {
		raw += int64(len(m.raw))
	}
	if raw > packedLimit {
		for _, m := range group {
			n += 512 + pad512(int64(len(m.stored)))
		}
		return n, false, nil
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range group {
		h := &tar.Header{Name: strings.TrimSuffix(m.name, ".zst"), Size: int64(len(m.raw)), Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return 0, false, err
		}
		if _, err := tw.Write(m.raw); err != nil {
			return 0, false, err
		}
	}
	if err := tw.Close(); err != nil {
		return 0, false, err
	}
	return 512 + pad512(int64(len(enc.EncodeAll(buf.Bytes(), nil)))), true, nil
}

func pad512(n int64) int64 { return (n + 511) &^ 511 }
