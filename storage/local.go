package storage

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sofadb/sofa/internal/flock"
)

// Stdio is the name under which Local reads stdin and writes stdout.
const Stdio = "-"

// Local is the Store of the local file system: names are file paths, and
// Stdio ("-") is stdin for Open and stdout for Create.
//
// Create writes to a temporary file next to the final name that is
// synced and renamed into place only by Commit, so a killed writer leaves
// no file under the final name. The temporary file,
// .<final name>.tmp-<12 hex digits>, is flocked for the writer's whole
// life (until the rename, or its removal on Abort). A writer killed with
// SIGKILL cannot remove its own; the lock dies with the process, and the
// next Create of the same final name removes it (CreateOptions.OnStale
// is told).
type Local struct {
	// Stdin and Stdout replace os.Stdin and os.Stdout for Stdio (tests).
	Stdin  io.Reader
	Stdout io.Writer
}

var _ Store = Local{}

// lockTemp takes the flock of a temporary file (flock.ErrBusy when a
// running writer holds it).
func lockTemp(f *os.File) error { return flock.TryLock(f) }

// tempPrefix is the name, without its random suffix, of the temporary
// files of archives written to path.
func tempPrefix(path string) string {
	return "." + filepath.Base(path) + ".tmp-"
}

// parentDir is the directory path's last element is in, as the system
// resolves it, with its trailing separator: path without that element,
// not cleaned ("sub/../a.sofa" is in "sub/../", which exists only if sub
// does), "./" for a bare name. A file name appended to it names the file
// in that directory.
func parentDir(path string) string {
	d := strings.TrimSuffix(path, filepath.Base(path))
	if d == "" {
		return "." + string(filepath.Separator)
	}
	return d
}

// Create implements Store.
func (l Local) Create(ctx context.Context, path string, o CreateOptions) (Writer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if path == Stdio {
		out := l.Stdout
		if out == nil {
			out = os.Stdout
		}
		if err := stdoutTakesArchive(out); err != nil {
			return nil, err
		}
		return &localWriter{bw: bufio.NewWriterSize(out, 1<<20)}, nil
	}
	// Lstat: a symbolic link is refused, never followed or replaced.
	if st, err := os.Lstat(path); err == nil {
		if err := notFile(path, st); err != nil {
			return nil, err
		}
		if !o.Overwrite {
			return nil, fmt.Errorf("%s %w", path, ErrExist)
		}
	}
	if st, err := os.Stat(parentDir(path)); err != nil {
		return nil, fmt.Errorf("create archive %s: %w", path, err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("create archive %s: %s is not a directory", path, parentDir(path))
	}
	for _, p := range removeStaleTemps(path) {
		if o.OnStale != nil {
			o.OnStale(p)
		}
	}
	tmp, f, err := createLockedTemp(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			// Named by the archive's path, not by the hidden temporary one.
			return nil, fmt.Errorf("create archive %s: %w", path, pe.Err)
		}
		return nil, fmt.Errorf("create archive %s: %w", path, err)
	}
	return &localWriter{path: path, tmp: tmp, overwrite: o.Overwrite, f: f, bw: bufio.NewWriterSize(f, 1<<20)}, nil
}

// notFile returns the error of Create for an existing path, st its
// Lstat, that is not a regular file (nil for a regular file): ErrIsDir
// for a directory, ErrNotFile for anything else. Overwrite never replaces
// one, and a named pipe is never opened (that would block).
func notFile(path string, st os.FileInfo) error {
	m := st.Mode()
	var kind string
	switch {
	case m.IsRegular():
		return nil
	case m.IsDir():
		return fmt.Errorf("%s %w", path, ErrIsDir)
	case m&os.ModeSymlink != 0:
		kind = "symbolic link"
	case m&os.ModeCharDevice != 0:
		kind = "character device"
	case m&os.ModeDevice != 0:
		kind = "block device"
	case m&os.ModeNamedPipe != 0:
		kind = "named pipe"
	case m&os.ModeSocket != 0:
		kind = "socket"
	default:
		kind = "special file"
	}
	return fmt.Errorf("%s is a %s, %w", path, kind, ErrNotFile)
}

// stdoutTakesArchive refuses a stdout that is a character device: a
// terminal (binary bytes on a screen, newlines rewritten) or /dev/null
// (where the runtime points a closed stdout): an archive written there
// is lost while the run says it was written, as the path /dev/null is
// refused. A pipe, a file or a socket takes it.
func stdoutTakesArchive(out io.Writer) error {
	f, ok := out.(*os.File)
	if !ok {
		return nil
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return fmt.Errorf("%w: redirect it to a file or a pipe", ErrStdoutDevice)
}

// createLockedTemp creates and flocks a new temporary file for path.
// Another writer's removeStaleTemps may lock and remove the file between
// its creation and its locking here; that is seen (the name no longer
// names the open file) and a fresh name is tried.
func createLockedTemp(path string) (string, *os.File, error) {
	for range 5 {
		var b [6]byte
		rand.Read(b[:])
		tmp := parentDir(path) + tempPrefix(path) + hex.EncodeToString(b[:])
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", nil, err
		}
		if err := lockTemp(f); err != nil {
			f.Close()
			if errors.Is(err, flock.ErrBusy) {
				continue // taken by a scanner that is removing it
			}
			os.Remove(tmp)
			return "", nil, fmt.Errorf("lock %s: %w", tmp, err)
		}
		fi, err1 := f.Stat()
		ni, err2 := os.Stat(tmp)
		if err1 == nil && err2 == nil && os.SameFile(fi, ni) {
			liveTemps.Store(tmp, true)
			return tmp, f, nil
		}
		f.Close() // removed by a scanner before we locked it
	}
	return "", nil, errors.New("could not create a temporary file (removed by concurrent writers each time)")
}

// liveTemps are the temporary files this process's writers hold (path ->
// true), for RemoveLiveTemps.
var liveTemps sync.Map

// RemoveLiveTemps removes the temporary files of the archives this
// process is writing to local files, for a process about to exit without
// aborting them (a second SIGINT): a temporary file is otherwise left
// until the next Create of the same final name. It returns the paths
// removed. The writers' later writes fail.
func RemoveLiveTemps() []string {
	var removed []string
	liveTemps.Range(func(k, _ any) bool {
		if os.Remove(k.(string)) == nil {
			removed = append(removed, k.(string))
		}
		liveTemps.Delete(k)
		return true
	})
	return removed
}

// removeStaleTemps removes the temporary files of earlier writers to path
// whose lock it can take: those were left by a writer that died without
// cleaning up (SIGKILL, power loss). Files whose lock is refused belong to
// a running writer and are left alone, as is anything not named exactly
// like a temporary file of this final name. It returns the removed paths;
// failures are ignored (the file simply stays).
func removeStaleTemps(path string) []string {
	if !flock.Supported {
		return nil
	}
	dir, prefix := parentDir(path), tempPrefix(path)
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
		p := dir + name
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		// Remove only while holding the lock, so a writer that creates the
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

// localWriter is an archive being written to a temporary file (or to
// stdout: path "").
type localWriter struct {
	path      string // final name; "" for stdout
	tmp       string
	overwrite bool // Commit may replace an existing archive
	f         *os.File
	bw        *bufio.Writer
}

func (w *localWriter) Write(p []byte) (int, error) { return w.bw.Write(p) }

// Commit flushes, syncs and renames the archive into place. The file is
// closed only after the rename, so its lock covers the whole time it lives
// under its temporary name. Without overwrite it never replaces a name
// that appeared since Create (ErrExist); with it, it replaces only a
// regular file.
func (w *localWriter) Commit() error {
	if err := w.bw.Flush(); err != nil {
		w.Abort()
		return fmt.Errorf("write archive: %w", err)
	}
	if w.f == nil {
		return nil
	}
	if err := w.f.Sync(); err != nil {
		w.Abort()
		return fmt.Errorf("sync archive: %w", err)
	}
	if err := w.publish(); err != nil {
		w.Abort()
		return err
	}
	err := w.f.Close()
	w.f = nil
	if err != nil {
		os.Remove(w.path) // not trusted: a failed writer leaves nothing under the final name
		return fmt.Errorf("close archive: %w", err)
	}
	if d, err := os.Open(parentDir(w.path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// publish gives the temporary file its final name: with overwrite, an
// atomic replace (of a regular file only); without, a hard link, which
// fails when the name exists, after which the temporary name is removed.
// A file system without hard links gets a rename after a last check (a
// name appearing between the two is then replaced).
func (w *localWriter) publish() error {
	if w.overwrite {
		if st, err := os.Lstat(w.path); err == nil {
			if err := notFile(w.path, st); err != nil {
				return err
			}
		}
	} else {
		err := os.Link(w.tmp, w.path)
		if err == nil {
			os.Remove(w.tmp) // before Close: removed while still locked
			liveTemps.Delete(w.tmp)
			return nil
		}
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s %w", w.path, ErrExist)
		}
		if _, err := os.Lstat(w.path); err == nil {
			return fmt.Errorf("%s %w", w.path, ErrExist)
		}
	}
	if err := os.Rename(w.tmp, w.path); err != nil {
		return fmt.Errorf("rename archive into place: %w", err)
	}
	liveTemps.Delete(w.tmp)
	return nil
}

// Abort removes the temporary file (stdout cannot be taken back).
func (w *localWriter) Abort() error {
	if w.f != nil {
		os.Remove(w.tmp) // before Close: removed while still locked
		liveTemps.Delete(w.tmp)
		w.f.Close()
		w.f = nil
	}
	return nil
}

// Open implements Store.
func (l Local) Open(ctx context.Context, path string) (Reader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if path == Stdio {
		in := l.Stdin
		if in == nil {
			in = os.Stdin
		}
		return stdinReader{bufio.NewReaderSize(in, 1<<20)}, nil
	}
	if st, err := os.Stat(path); err == nil {
		if m := st.Mode(); m.IsDir() {
			return nil, fmt.Errorf("%s is a directory, %w", path, ErrNotReadable)
		} else if !m.IsRegular() {
			// opening a named pipe would block until a writer comes, and
			// a second open (a restore reads an archive more than once)
			// wait for another
			return nil, fmt.Errorf("%s is not a regular file (a named pipe, socket or device), %w: give - and pipe the archive to stdin", path, ErrNotReadable)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("archive %s %w", path, ErrNotExist)
		}
		return nil, fmt.Errorf("open archive: %w", err)
	}
	return fileReader{f}, nil
}

type fileReader struct{ *os.File }

func (r fileReader) Size() int64 {
	st, err := r.File.Stat()
	if err != nil {
		return -1
	}
	return st.Size()
}

type stdinReader struct{ *bufio.Reader }

func (stdinReader) ReadAt([]byte, int64) (int, error) { return 0, ErrNotSeekable }
func (stdinReader) Close() error                      { return nil }
func (stdinReader) Size() int64                       { return -1 }

// Stat implements Store.
func (l Local) Stat(ctx context.Context, path string) (Info, error) {
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Info{}, fmt.Errorf("archive %s %w", path, ErrNotExist)
		}
		return Info{}, fmt.Errorf("stat archive: %w", err)
	}
	return Info{Name: path, Size: st.Size(), ModTime: st.ModTime()}, nil
}

// Remove implements Store.
func (l Local) Remove(ctx context.Context, path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("archive %s %w", path, ErrNotExist)
		}
		return fmt.Errorf("remove archive: %w", err)
	}
	return nil
}
