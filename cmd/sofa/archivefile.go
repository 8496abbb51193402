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
	"strings"
)

// archiveSink is where a backup is written: stdout, or a temporary file
// next to the final name that is synced and renamed into place only when
// the archive is complete, so a killed backup leaves no file under the
// final name and an existing archive is never overwritten without force.
//
// The temporary file, .<final name>.tmp-<12 hex digits>, is flocked for
// the sink's whole life (until the rename, or its removal on abort). A
// backup killed with SIGKILL cannot remove its own; the lock dies with the
// process, and the next backup to the same final name removes it (see
// removeStaleTemps).
type archiveSink struct {
	path string // final name; "" for stdout
	tmp  string
	f    *os.File
	bw   *bufio.Writer
	w    io.Writer
	// stale lists the leftovers of killed backups removed before this
	// sink's temporary file was created (full paths), for the caller to
	// log; usually empty.
	stale []string
}

// errTempBusy says another process holds the lock on a temporary file.
var errTempBusy = errors.New("temporary file is locked by a running backup")

// tempPrefix is the name, without its random suffix, of the temporary
// files of backups to path.
func tempPrefix(path string) string {
	return "." + filepath.Base(path) + ".tmp-"
}

func createArchive(path string, force bool) (*archiveSink, error) {
	if path == "-" {
		bw := bufio.NewWriterSize(os.Stdout, 1<<20)
		return &archiveSink{bw: bw, w: bw}, nil
	}
	if _, err := os.Stat(path); err == nil && !force {
		return nil, usageErr("%s exists (use --force to overwrite it)", path)
	}
	stale := removeStaleTemps(path)
	tmp, f, err := createLockedTemp(path)
	if err != nil {
		return nil, fatal(fmt.Errorf("create archive: %v", err))
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	return &archiveSink{path: path, tmp: tmp, f: f, bw: bw, w: bw, stale: stale}, nil
}

// createLockedTemp creates and flocks a new temporary file for path. Another
// backup's removeStaleTemps may lock and remove the file between its
// creation and its locking here; that is seen (the name no longer names
// the open file) and a fresh name is tried.
func createLockedTemp(path string) (string, *os.File, error) {
	for range 5 {
		var b [6]byte
		rand.Read(b[:])
		tmp := filepath.Join(filepath.Dir(path), tempPrefix(path)+hex.EncodeToString(b[:]))
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", nil, err
		}
		if err := lockTemp(f); err != nil {
			f.Close()
			if errors.Is(err, errTempBusy) {
				continue // taken by a scanner that is removing it
			}
			os.Remove(tmp)
			return "", nil, fmt.Errorf("lock %s: %v", tmp, err)
		}
		fi, err1 := f.Stat()
		ni, err2 := os.Stat(tmp)
		if err1 == nil && err2 == nil && os.SameFile(fi, ni) {
			return tmp, f, nil
		}
		f.Close() // removed by a scanner before we locked it
	}
	return "", nil, errors.New("could not create a temporary file (removed by concurrent backups each time)")
}

// removeStaleTemps removes the temporary files of earlier backups to path
// whose lock it can take: those were left by a backup that died without
// cleaning up (SIGKILL, power loss). Files whose lock is refused belong to
// a running backup and are left alone, as is anything not named exactly
// like a temporary file of this final name. It returns the removed paths;
// failures are ignored (the file simply stays).
func removeStaleTemps(path string) []string {
	if !canLockTemps {
		return nil
	}
	dir, prefix := filepath.Dir(path), tempPrefix(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, prefix) || !isHex(name[len(prefix):]) {
			continue
		}
		p := filepath.Join(dir, name)
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		// Remove only while holding the lock, so a backup that creates the
		// file right now either never gets the lock or sees it gone.
		if lockTemp(f) == nil && os.Remove(p) == nil {
			removed = append(removed, p)
		}
		f.Close()
	}
	return removed
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && len(s)%2 == 0
}

// commit flushes, syncs and renames the archive into place. The file is
// closed only after the rename, so its lock covers the whole time it lives
// under its temporary name.
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
	if err := os.Rename(s.tmp, s.path); err != nil {
		s.abort()
		return fmt.Errorf("rename archive into place: %v", err)
	}
	err := s.f.Close()
	s.f = nil
	if err != nil {
		os.Remove(s.path) // not trusted: a failed backup leaves nothing under the final name
		return fmt.Errorf("close archive: %v", err)
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
		os.Remove(s.tmp) // before Close: removed while still locked
		s.f.Close()
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
