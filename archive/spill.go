package archive

import (
	"bytes"
	"io"
	"os"
)

// spillBuffer is an append-only byte log kept in memory up to limit bytes
// and moved to a temporary file beyond that, so a writer's memory stays
// flat however many members an archive holds.
type spillBuffer struct {
	dir   string
	limit int
	mem   bytes.Buffer
	file  *os.File
	size  int64
}

func (s *spillBuffer) Write(p []byte) (int, error) {
	if s.file == nil && s.mem.Len()+len(p) > s.limit {
		f, err := os.CreateTemp(s.dir, "sofa-manifest-*.tmp")
		if err != nil {
			return 0, err
		}
		_ = os.Remove(f.Name()) // unlinked: the OS reclaims it on exit
		if _, err := f.Write(s.mem.Bytes()); err != nil {
			_ = f.Close()
			return 0, err
		}
		s.file = f
		s.mem = bytes.Buffer{}
	}
	var n int
	var err error
	if s.file != nil {
		n, err = s.file.Write(p)
	} else {
		n, err = s.mem.Write(p)
	}
	s.size += int64(n)
	return n, err
}

// reader returns a reader over everything written so far.
func (s *spillBuffer) reader() (io.Reader, error) {
	if s.file == nil {
		return bytes.NewReader(s.mem.Bytes()), nil
	}
	return io.NewSectionReader(s.file, 0, s.size), nil
}

func (s *spillBuffer) close() {
	if s.file != nil {
		_ = s.file.Close()
		s.file = nil
	}
}
