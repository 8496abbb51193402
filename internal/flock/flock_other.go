//go:build !unix

package flock

import "os"

// Supported is false here: without flock a file left by a killed
// process cannot be told from one a running process holds.
const Supported = false

// TryLock is a no-op on this OS.
func TryLock(*os.File) error { return nil }
