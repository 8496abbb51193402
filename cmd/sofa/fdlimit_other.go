//go:build !unix

package main

// openFileLimit: no open-file limit is read outside unix systems.
func openFileLimit() (uint64, bool) { return 0, false }
