package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// archiveSink is where a backup is written: stdout, or a temporary file
// next to the final name that is synced and renamed into place only when
// the archive is complete, so a killed backup leaves no file under the
// final name and an existing archive is never overwritten without force.
type archiveSink struct {
	path string // final name; "" for stdout
	tmp  string
	f    *os.File
	bw   *bufio.Writer
	w    io.Writer
}

func createArchive(path string, force bool) (*archiveSink, error) {
	if path == "-" {
		bw := bufio.NewWriterSize(os.Stdout, 1<<20)
		return &archiveSink{bw: bw, w: bw}, nil
	}
	if _, err := os.Stat(path); err == nil && !force {
		return nil, usageErr("%s exists (use --force to overwrite it)", path)
	}
	var b [6]byte
	rand.Read(b[:])
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-"+hex.EncodeToString(b[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fatal(fmt.Errorf("create archive: %v", err))
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	return &archiveSink{path: path, tmp: tmp, f: f, bw: bw, w: bw}, nil
}

// commit flushes, syncs and renames the archive into place.
func (s *archiveSink) commit() error {
	if err := s.bw.Flush(); err != nil {
		s.abort()
		return fmt.Errorf("write archive: %v", err)
	}
	if s.f == nil {
		return nil
	}
	if err := s.f.Sync(); err != nil {
		s.abort()
		return fmt.Errorf("sync archive: %v", err)
	}
	if err := s.f.Close(); err != nil {
		s.abort()
		return fmt.Errorf("close archive: %v", err)
	}
	if err := os.Rename(s.tmp, s.path); err != nil {
		os.Remove(s.tmp)
		return fmt.Errorf("rename archive into place: %v", err)
	}
	if d, err := os.Open(filepath.Dir(s.path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// abort removes the temporary file (stdout cannot be taken back).
func (s *archiveSink) abort() {
	if s.f != nil {
		s.f.Close()
		os.Remove(s.tmp)
		s.f = nil
	}
}

// openArchive opens an archive file, or stdin for "-".
func openArchive(path string) (io.ReadCloser, error) {
	if path == "-" {
		return io.NopCloser(bufio.NewReaderSize(os.Stdin, 1<<20)), nil
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fatal(fmt.Errorf("archive %s does not exist", path))
		}
		return nil, fatal(fmt.Errorf("open archive: %v", err))
	}
	return f, nil
}
