// Package storage holds archive files behind a small interface: a Store
// creates an archive (written, then committed under its final name or
// aborted, leaving nothing under it), opens one for reading (sequentially,
// or at an offset when the store can seek), stats and removes one.
//
// Local is the store of the local file system (plus "-" for stdin and
// stdout); Memory keeps archives in memory, for tests; package
// storage/s3 holds them in S3 buckets (s3://BUCKET/KEY). All pass the
// conformance suite in package storagetest, which every implementation
// runs. Nothing else in sofa opens archive paths.
package storage

import (
	"context"
	"errors"
	"io"
	"time"
)

// Errors a Store returns, wrapped after the name ("archive x.sofa does
// not exist"); test with errors.Is.
var (
	// ErrExist: Create of a name that exists, without Overwrite.
	ErrExist = errors.New("exists")
	// ErrIsDir: Create of a name that is a directory (Overwrite never
	// replaces one).
	ErrIsDir = errors.New("is a directory, not an archive file")
	// ErrNotFile: Create of a name that is neither a regular file nor a
	// directory (a symbolic link, device, named pipe or socket): refused
	// with or without Overwrite, wrapped after what it is ("x is a
	// symbolic link, not an archive file").
	ErrNotFile = errors.New("not an archive file")
	// ErrNotReadable: Open of a name that is no file (a directory), or
	// one that can be read only once (a named pipe, a socket: a restore
	// reads an archive more than once; stdin, "-", is the stream to give).
	ErrNotReadable = errors.New("not an archive file")
	// ErrStdoutDevice: Create of "-" when stdout is a terminal or a
	// device (/dev/null; a closed stdout is one): an archive written
	// there would be lost.
	ErrStdoutDevice = errors.New("stdout is a terminal or a device (/dev/null, or stdout closed), not a place for an archive")
	// ErrNotExist: Open, Stat or Remove of a name that does not exist.
	ErrNotExist = errors.New("does not exist")
	// ErrNotSeekable: ReadAt on a reader that can only be read in order
	// (stdin).
	ErrNotSeekable = errors.New("archive can only be read in order")
)

// Store holds archives by name.
type Store interface {
	// Create starts writing the archive name. Nothing is visible under
	// name before Commit; Abort (or a crash) leaves nothing under it.
	Create(ctx context.Context, name string, o CreateOptions) (Writer, error)
	// Open opens the archive name for reading.
	Open(ctx context.Context, name string) (Reader, error)
	// Stat describes the archive name.
	Stat(ctx context.Context, name string) (Info, error)
	// Remove deletes the archive name.
	Remove(ctx context.Context, name string) error
}

// CreateOptions configure Store.Create.
type CreateOptions struct {
	// Overwrite replaces an existing archive on Commit; without it Create
	// refuses an existing name with ErrExist (Local and s3 refuse it at
	// Commit too when it appeared meanwhile).
	Overwrite bool
	// OnStale, if set, is told each leftover of an earlier writer that
	// died before committing which Create removed (stores that leave
	// such things behind only).
	OnStale func(name string)
}

// Writer is an archive being written.
type Writer interface {
	io.Writer
	// Commit makes the archive durable and visible under its name.
	Commit() error
	// Abort drops what was written; the name is left as it was. Abort
	// after Commit does nothing.
	Abort() error
}

// Reader is an archive opened for reading. Read reads it in order from
// the start; ReadAt (ErrNotSeekable where it cannot) does not move that
// position.
type Reader interface {
	io.Reader
	io.ReaderAt
	io.Closer
	// Size is the archive's length in bytes, -1 when unknown (stdin).
	Size() int64
}

// Sequential is implemented by a Reader whose ReadAt costs a round trip
// per call (an object store: one ranged GET each) while Read streams with
// read-ahead. A caller that would read many small pieces at offsets (an
// archive's tar headers, one group's members) reads such an archive in
// order instead.
type Sequential interface {
	PrefersSequential() bool
}

// PrefersSequential tells whether r is a Sequential that prefers it.
func PrefersSequential(r Reader) bool {
	s, ok := r.(Sequential)
	return ok && s.PrefersSequential()
}

// Parallel is implemented by a Store that moves an archive in pieces,
// several at once (an object store: multipart uploads and ranged GETs).
type Parallel interface {
	// Parallelism returns the pieces in flight at once (the store's
	// transfers) and the bytes of each (its part size).
	Parallelism() (transfers int, partSize int64)
}

// Parallelism returns st's transfers and part size when it is Parallel;
// 0, 0 for a store whose reads and writes are no round trips (a file).
func Parallelism(st Store) (transfers int, partSize int64) {
	if p, ok := st.(Parallel); ok {
		return p.Parallelism()
	}
	return 0, 0
}

// Info describes a stored archive.
type Info struct {
	Name    string
	Size    int64
	ModTime time.Time
}
