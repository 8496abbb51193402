package couch

import (
	"context"

	"github.com/sofadb/sofa/replicate"
)

// FillsStubsByName says how the server fills an attachment stub of a
// revision written with new_edits=false (replicate.StubChecker): CouchDB
// takes the attachment of that name and revpos from the nearest ancestor
// it holds a body of, whatever digest the stub names; PouchDB Server
// takes the bytes of the digest the stub names, and refuses a stub whose
// digest it lacks (412 missing_stub).
func (d *DB) FillsStubsByName() bool { return d.srv.Vendor != VendorPouchDB }

// ReadHeld reads revisions the database holds with their attachment
// stubs (replicate.StubChecker), as FetchRevs does: a revision that is no
// longer a leaf may be answered with its newer leaves (CouchDB's
// latest=true), and one the database lacks is left out.
func (d *DB) ReadHeld(ctx context.Context, reqs []replicate.RevRequest) ([]*replicate.Doc, error) {
	docs, _, err := d.FetchRevs(ctx, reqs)
	return docs, err
}

var _ replicate.StubChecker = (*DB)(nil)

// DropsTombstoneAttachments says whether the server stores a deleted
// revision without its attachments (PouchDB Server;
// replicate.TombstoneAttachmentsDropper).
func (d *DB) DropsTombstoneAttachments() bool { return d.srv.Vendor == VendorPouchDB }

var _ replicate.TombstoneAttachmentsDropper = (*DB)(nil)
