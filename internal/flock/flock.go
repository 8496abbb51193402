// Package flock holds advisory locks on open files that die with the
// process holding them: a file whose lock can be taken was left by a
// process that is gone (storage's temporary archive files, storage/s3's
// registry of multipart uploads in progress on this host).
package flock

import "errors"

// ErrBusy: another process (or another open file of this one) holds the
// lock.
var ErrBusy = errors.New("locked by a running process")
