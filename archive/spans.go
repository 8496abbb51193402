package archive

import (
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"sort"
)

// countReader counts the bytes read through it: an in-order Reader's
// position in the archive, for the spans its index must give.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

// spans are where an in-order read found the members its index places:
// the header and manifest members, each database group (from its
// meta.json to its end.json, padding included), each blob (its first
// copy), the index member's stored bytes; and, per group, the blobs it
// refers to that another group stored (extern).
type spans struct {
	header, manifest Span
	groupAt          map[string]int64 // dir -> offset of its meta.json
	groups           map[string]Span
	blobs            map[[32]byte]Span
	indexAt          int64 // offset of the index member's stored bytes
	indexSize        int64
	owner            map[[32]byte]string // blob -> dir of the group that stored it
	extern           map[string]map[[32]byte]bool
}

func newSpans() *spans {
	return &spans{groupAt: map[string]int64{}, groups: map[string]Span{}, blobs: map[[32]byte]Span{},
		owner: map[[32]byte]string{}, extern: map[string]map[[32]byte]bool{}}
}

// member notes where the member p lies: from start (its first tar
// header) to end (its content padded); its content starts at data and
// holds size bytes as stored.
func (s *spans) member(p parsedName, start, data, size int64) {
	sp := Span{start, align512(data + size)}
	switch p.kind {
	case kindHeader:
		s.header = sp
	case kindManifest:
		s.manifest = sp
	case kindMeta:
		s.groupAt[p.dir] = start
	case kindEnd:
		if at, ok := s.groupAt[p.dir]; ok {
			s.groups[p.dir] = Span{at, sp.End}
		}
	case kindBlob:
		if _, ok := s.blobs[p.sum]; !ok {
			s.blobs[p.sum] = sp
		}
	case kindIndex:
		s.indexAt, s.indexSize = data, size
	}
}

// stored notes that the group dir stored blob sum (its first copy).
func (s *spans) stored(sum [32]byte, dir string) {
	if _, ok := s.owner[sum]; !ok {
		s.owner[sum] = dir
	}
}

// referred notes that the group dir refers to blob sum.
func (s *spans) referred(sum [32]byte, dir string) {
	if s.owner[sum] == dir {
		return
	}
	if s.extern[dir] == nil {
		s.extern[dir] = map[[32]byte]bool{}
	}
	s.extern[dir][sum] = true
}

// check compares the index idx with what the read found; the error says
// the first disagreement.
func (s *spans) check(idx *TOC) error {
	if idx.HeaderAt != s.header {
		return fmt.Errorf("places %s at %v, the archive has it at %v", headerName, idx.HeaderAt, s.header)
	}
	if idx.Manifest != s.manifest {
		return fmt.Errorf("places %s at %v, the archive has it at %v", manifestName, idx.Manifest, s.manifest)
	}
	for _, d := range idx.Databases {
		dir := d.Summary.Dir
		if got, ok := s.groups[dir]; !ok || got != d.Span {
			return fmt.Errorf("places database %q at %v, the archive has it at %v", d.Summary.Name, d.Span, got)
		}
		var want []string
		for sum := range s.extern[dir] {
			want = append(want, fmt.Sprintf("%x", sum))
		}
		got := slices.Clone(d.ExternBlobs)
		sort.Strings(want)
		sort.Strings(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("lists %d blobs of other groups for database %q, its documents refer to %d", len(got), d.Summary.Name, len(want))
		}
	}
	if len(idx.Blobs) != len(s.blobs) {
		return fmt.Errorf("places %d blobs, the archive holds %d", len(idx.Blobs), len(s.blobs))
	}
	for _, b := range idx.Blobs {
		var sum [32]byte
		if raw, err := hex.DecodeString(b.SHA256); err != nil || len(raw) != len(sum) {
			return fmt.Errorf("names blob %q", b.SHA256)
		} else {
			copy(sum[:], raw)
		}
		if got, ok := s.blobs[sum]; !ok || got != b.Span {
			return fmt.Errorf("places blob %s at %v, the archive has it at %v", b.SHA256, b.Span, got)
		}
	}
	return nil
}
