package couch

import (
	"context"

	"github.com/sofadb/sofa/internal/jsonx"
	"github.com/sofadb/sofa/replicate"
)

var _ replicate.AttachmentBatchReader = (*DB)(nil)

// ReadAttachments (replicate.AttachmentBatchReader) reads the listed
// identity-encoded attachments of many revisions with one
// `POST /db/_bulk_get?revs=true&attachments=true` (each revision's
// attachments inline as base64): on CouchDB one GET per attachment costs
// the server more than the bytes of a small one. Each attachment's bytes
// are checked against its md5 digest; an attachment missing from the
// answer, or not matching, keeps Data nil and is read alone. On PouchDB
// Server, once `_bulk_get` is off, or after a refusal, it reads nothing.
// Its only error is ctx's.
func (d *DB) ReadAttachments(ctx context.Context, revs []replicate.AttRead) error {
	if d.srv.Vendor != VendorCouchDB || d.attBatchOff.Load() || len(revs) == 0 {
		return nil
	}
	if d.bulkGetOff {
		return nil
	}
	reqs := make([]replicate.RevRequest, len(revs))
	body := append(make([]byte, 0, 64*len(revs)), `{"docs":[`...)
	for i, q := range revs {
		reqs[i] = replicate.RevRequest{ID: q.ID, Rev: q.Rev}
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"id":`...)
		body = jsonx.Quote(body, q.ID)
		body = append(body, `,"rev":`...)
		body = jsonx.Quote(body, q.Rev)
		body = append(body, '}')
	}
	body = append(body, `]}`...)
	resp, err := d.srv.do(ctx, &request{Method: "POST", Path: d.path + "/_bulk_get", Query: "revs=true&attachments=true",
		Body: body, ContentType: "application/json"})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if st := StatusOf(err); st >= 400 && st < 500 && st != 408 && st != 429 || st == 501 {
			d.attBatchOff.Store(true)
		}
		return nil // each is read alone, which reports what fails
	}
	defer resp.Body.Close()
	docs, _, err := ParseBulkGet(resp.Body, reqs)
	if err != nil {
		return ctx.Err() // read alone
	}
	byRev := make(map[string]*replicate.Doc, len(docs))
	for _, doc := range docs {
		byRev[doc.ID+"\x00"+doc.Rev] = doc
	}
	for _, q := range revs {
		doc := byRev[q.ID+"\x00"+q.Rev]
		if doc == nil {
			continue
		}
		for _, want := range q.Atts {
			for _, a := range doc.Atts {
				if a.Name != want.Name || a.Data == nil {
					continue
				}
				if data, enc, err := storedBytes(a.Data, "", want); err == nil && enc == "" {
					want.Data = data
				}
				break
			}
		}
	}
	return nil
}
