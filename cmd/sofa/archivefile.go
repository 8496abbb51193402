package main

import (
	"context"
	"errors"
	"io"

	"github.com/sofadb/sofa/storage"
)

// archives is where archive files live: the local file system, "-" for
// stdin and stdout (temporary name, flock, fsync, rename and the sweep of
// leftovers of killed backups are storage.Local's).
var archives storage.Store = storage.Local{}

// createArchive starts writing the archive path; logf is told each
// leftover of a killed backup removed on the way.
func createArchive(ctx context.Context, path string, force bool, logf func(string, ...any)) (storage.Writer, error) {
	w, err := archives.Create(ctx, path, storage.CreateOptions{Overwrite: force, OnStale: func(p string) {
		logf("removed %s (left by a killed backup)", p)
	}})
	switch {
	case errors.Is(err, storage.ErrExist):
		return nil, usageErr("%w (use --force to overwrite it)", err)
	case err != nil:
		return nil, fatal(err)
	}
	return w, nil
}

// openArchive opens an archive file, or stdin for "-".
func openArchive(path string) (io.ReadCloser, error) {
	r, err := archives.Open(context.Background(), path)
	if err != nil {
		return nil, fatal(err)
	}
	return r, nil
}
