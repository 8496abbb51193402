//go:build !unix

package storage

import "os"

// canLockTemps is false here: without flock a leftover cannot be told
// from the temporary file of a running writer, so none is removed.
const canLockTemps = false

// lockTemp is a no-op on this OS.
func lockTemp(*os.File) error { return nil }
