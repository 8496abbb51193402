package sofa

import (
	"testing"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/replicate"
)

// Restore's batches in flight per database follow the target's server
// unless the caller set them.
func TestRestoreWorkersByServer(t *testing.T) {
	for _, c := range []struct {
		set    int
		vendor couch.Vendor
		want   int
	}{
		{0, couch.VendorCouchDB, CouchDBRestoreWorkers},
		{0, couch.VendorPouchDB, PouchDBRestoreWorkers},
		{0, couch.VendorUnknown, replicate.DefaultWorkers},
		{3, couch.VendorCouchDB, 3},
		{5, couch.VendorPouchDB, 5},
	} {
		if got := restoreWorkers(c.set, c.vendor); got != c.want {
			t.Errorf("restoreWorkers(%d, %s) = %d, want %d", c.set, c.vendor, got, c.want)
		}
	}
	if CouchDBRestoreWorkers <= replicate.DefaultWorkers {
		t.Errorf("CouchDBRestoreWorkers = %d, want more than the engine's default %d (measured faster into CouchDB)", CouchDBRestoreWorkers, replicate.DefaultWorkers)
	}
}
