package archive

import (
	"fmt"
	"os"
)

// blobStore keeps the attachment blobs read so far, by SHA-256, for the
// revisions that refer to them later in the archive. Blobs stay in memory
// up to a budget; beyond it they are appended to an unlinked temporary
// file and read back on demand, or, with refetch (a reader that can read
// any blob again at its offset), not kept at all.
type blobStore struct {
	dir     string
	budget  int64
	refetch bool
	used    int64
	spill   *os.File
	end     int64
	blobs   map[[32]byte]blobLoc
}

type blobLoc struct {
	mem      []byte // nil when spilled
	off, len int64
}

func newBlobStore(dir string, budget int64) *blobStore {
	return &blobStore{dir: dir, budget: budget, blobs: map[[32]byte]blobLoc{}}
}

func (s *blobStore) has(sum [32]byte) bool { _, ok := s.blobs[sum]; return ok }

// size is the length of a blob held.
func (s *blobStore) size(sum [32]byte) (int64, bool) {
	loc, ok := s.blobs[sum]
	return loc.len, ok
}

// put stores data (not retained when spilled; not stored at all past the
// budget with refetch). A blob already held is kept.
func (s *blobStore) put(sum [32]byte, data []byte) error {
	if s.has(sum) {
		return nil
	}
	if s.used+int64(len(data)) <= s.budget {
		s.used += int64(len(data))
		s.blobs[sum] = blobLoc{mem: data, len: int64(len(data))}
		return nil
	}
	if s.refetch {
		return nil
	}
	if s.spill == nil {
		f, err := os.CreateTemp(s.dir, "sofa-blobs-*.tmp")
		if err != nil {
			return fmt.Errorf("archive: blob spill file: %w", err)
		}
		_ = os.Remove(f.Name()) // unlinked: nothing left behind
		s.spill = f
	}
	if _, err := s.spill.WriteAt(data, s.end); err != nil {
		return fmt.Errorf("archive: blob spill file: %w", err)
	}
	s.blobs[sum] = blobLoc{off: s.end, len: int64(len(data))}
	s.end += int64(len(data))
	return nil
}

// get returns the blob's bytes; ok is false when it is unknown. Bytes held
// in memory are shared between callers and must not be modified.
func (s *blobStore) get(sum [32]byte) ([]byte, bool, error) {
	loc, ok := s.blobs[sum]
	if !ok {
		return nil, false, nil
	}
	if loc.len == 0 {
		return []byte{}, true, nil // an empty attachment still has bytes
	}
	if loc.mem != nil {
		return loc.mem[:loc.len:loc.len], true, nil
	}
	b := make([]byte, loc.len)
	if _, err := s.spill.ReadAt(b, loc.off); err != nil {
		return nil, true, fmt.Errorf("archive: blob spill file: %w", err)
	}
	return b, true, nil
}

func (s *blobStore) close() {
	if s.spill != nil {
		_ = s.spill.Close()
		s.spill = nil
	}
	s.blobs = nil
}
