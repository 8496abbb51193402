package s3

import (
	"os"
	"time"

	"github.com/sofadb/sofa/storage"
)

// Die makes w as a writer killed with SIGKILL leaves it: its multipart
// upload in progress, its heartbeat stopped, its registry file unlocked
// but left in place; w is not used again.
func Die(w storage.Writer) {
	x := w.(*writer)
	x.wg.Wait()
	x.stopHeartbeat()
	x.releaseRegistry()
	x.done.Store(true)
}

// UploadID is w's multipart upload ("" before the first part).
func UploadID(w storage.Writer) string { return w.(*writer).uploadID }

// Marker is the marker part's content now.
func Marker() []byte { return marker(time.Now()) }

// MarkerPart is the marker's part number.
const MarkerPart = markerPart

// Elsewhere makes w's upload look like one of a writer on another host:
// its registry file is removed (w keeps heartbeating).
func Elsewhere(w storage.Writer) {
	x := w.(*writer)
	if x.reg != nil {
		os.Remove(x.reg.Name())
	}
}
