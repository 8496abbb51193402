package main

import (
	"context"
	"io"

	"github.com/sofadb/sofa/storage"
)

// archives is where archive files live: the local file system, "-" for
// stdin and stdout (temporary name, flock, fsync, rename and the sweep of
// leftovers of killed backups are storage.Local's).
var archives storage.Store = storage.Local{}

// openArchive opens an archive file, or stdin for "-".
func openArchive(path string) (io.ReadCloser, error) {
	r, err := archives.Open(context.Background(), path)
	if err != nil {
		return nil, fatal(err)
	}
	return r, nil
}
