package couch

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sofadb/sofa/replicate"
)

// WriteDocs stores revisions with new_edits=false. Revisions without
// attachment bytes, or with small identity-encoded ones, go in one
// `_bulk_docs` request; the others as one multipart/related
// `PUT /db/doc?new_edits=false` each, bytes as stored. A whole-request
// refusal (413, 400) wraps replicate.ErrBatchRejected.
func (d *DB) WriteDocs(ctx context.Context, docs []*replicate.Doc) ([]replicate.DocError, error) {
	f, _, err := d.writeDocs(ctx, docs, nil)
	return f, err
}

// writeDocs is WriteDocs, with local (if not nil) in the `_bulk_docs`
// request; stored says the server stored it.
func (d *DB) writeDocs(ctx context.Context, docs []*replicate.Doc, local *localDoc) ([]replicate.DocError, bool, error) {
	docs = d.withoutServerOwnedDocs(docs)
	var bulk, single []*replicate.Doc
	if d.srv.Vendor == VendorPouchDB {
		// PouchDB Server ignores "encoding" and would store gzip bytes as
		// the content: send it identity bytes (it computes the digest).
		for _, doc := range docs {
			if err := decodeGzipAtts(doc); err != nil {
				return nil, false, err
			}
		}
	}
	for _, doc := range docs {
		if d.longURL(doc.ID) {
			// No server takes a PUT to this URL (CouchDB answers 400):
			// the revision goes inline in _bulk_docs, whose JSON form
			// cannot carry gzip-stored bytes, so they go as identity
			// bytes (the target computes encoding and digest).
			if err := decodeGzipAtts(doc); err != nil {
				return nil, false, err
			}
			bulk = append(bulk, doc)
			continue
		}
		if d.inlineable(doc) {
			bulk = append(bulk, doc)
		} else {
			single = append(single, doc)
		}
	}
	var failures []replicate.DocError
	stored := false
	if len(bulk) > 0 {
		f, err := d.bulkDocs(ctx, bulk, local)
		if err != nil {
			return nil, false, err
		}
		if local != nil {
			stored = true
			f = slices.DeleteFunc(f, func(e replicate.DocError) bool {
				if e.ID == local.id {
					stored = false
					return true
				}
				return false
			})
		}
		failures = append(failures, f...)
	}
	for _, doc := range single {
		f, err := d.putMultipart(ctx, doc)
		if err != nil {
			return nil, stored, err
		}
		if f != nil {
			failures = append(failures, *f)
		}
	}
	if stored {
		d.setLocalRev(local.id, "0-1")
	}
	return failures, stored, nil
}

// localDoc is a `_local` document sent in a `_bulk_docs` request.
type localDoc struct {
	id   string // "_local/..."
	body []byte // a JSON object without _id and _rev
}

// WriteDocsWithLocal is WriteDocs that also writes the `_local` document
// id in the same `_bulk_docs` request, at no request of its own (CouchDB
// and PouchDB Server both take `_local` documents there, with
// new_edits=false too): replicate.LocalWriter. body is a JSON object
// (an `_id` or `_rev` in it is replaced); the document must not exist
// yet. stored reports that the server stored it: false when no
// `_bulk_docs` was sent (every revision went as a multipart PUT) or the
// server refused it (its refusal is not among the returned failures).
// A stored document's `_rev` is then known to LocalRev.
func (d *DB) WriteDocsWithLocal(ctx context.Context, docs []*replicate.Doc, id string, body []byte) (fails []replicate.DocError, stored bool, err error) {
	if d.readOnly {
		f, err := d.WriteDocs(ctx, docs)
		return f, false, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, false, fmt.Errorf("%s: _local document %q: %w", d, id, err)
	}
	delete(obj, "_id")
	delete(obj, "_rev")
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, false, err
	}
	return d.writeDocs(ctx, docs, &localDoc{id: "_local/" + strings.TrimPrefix(id, "_local/"), body: b})
}

// maxURLPath is the longest document path sofa puts in a URL; longer
// ids are read and written through POST bodies (_bulk_get, _bulk_docs).
const maxURLPath = 8000

// longURL: a request on this document's URL would be too long.
func (d *DB) longURL(docID string) bool {
	return len(d.path)+1+len(EscapeDocID(docID)) > maxURLPath
}

func (d *DB) inlineable(doc *replicate.Doc) bool {
	var n int64
	for _, a := range doc.Atts {
		if a.Stub || a.Data == nil {
			continue
		}
		if a.Encoding != "" {
			return false
		}
		n += int64(len(a.Data))
	}
	if n == 0 {
		return true
	}
	if d.multipart {
		return false
	}
	if d.srv.Vendor == VendorPouchDB {
		return true
	}
	max := d.inlineMax
	if max == 0 {
		max = 64 << 10
	}
	return n <= max
}

func (d *DB) bulkDocs(ctx context.Context, docs []*replicate.Doc, local *localDoc) ([]replicate.DocError, error) {
	size := 32
	for _, doc := range docs {
		size += len(doc.Body) + 16
		for _, a := range doc.Atts {
			size += len(a.Data)*4/3 + 128 + len(a.Name)
		}
	}
	body := make([]byte, 0, size)
	body = append(body, `{"new_edits":false,"docs":[`...)
	for i, doc := range docs {
		if i > 0 {
			body = append(body, ',')
		}
		body = doc.AppendJSON(body, replicate.Inline)
	}
	if local != nil {
		body = local.appendJSON(body, d.srv.Vendor, len(docs) > 0)
	}
	body = append(body, "]}"...)
	resp, err := d.srv.do(ctx, &request{Method: "POST", Path: d.path + "/_bulk_docs", Body: body, ContentType: "application/json"})
	if err != nil {
		if st := StatusOf(err); st == 413 || st == 400 {
			return nil, fmt.Errorf("%w: %w", replicate.ErrBatchRejected, err)
		}
		if StatusOf(err) == 412 {
			return nil, fmt.Errorf("%w: %w: %w", replicate.ErrBatchRejected, replicate.ErrMissingStub, err)
		}
		return nil, d.fail("_bulk_docs", err)
	}
	defer resp.Body.Close()
	f, err := ParseBulkDocs(resp.Body, docs)
	if err != nil {
		return nil, fmt.Errorf("%s: _bulk_docs: %w", d, err)
	}
	return f, nil
}

// putMultipart writes one revision with its attachment bytes as
// multipart/related. Per-document refusals (401, 403, 412 missing_stub,
// 413, 415) come back as a DocError.
func (d *DB) putMultipart(ctx context.Context, doc *replicate.Doc) (*replicate.DocError, error) {
	return d.WriteStreamed(ctx, doc, nil) // no attachment is marked Stream: all bytes are in doc
}

// decodeGzipAtts turns gzip-stored attachment bytes into identity bytes,
// dropping encoding and digest (which describe the stored bytes).
func decodeGzipAtts(doc *replicate.Doc) error {
	for _, a := range doc.Atts {
		if a.Encoding != "gzip" || a.Data == nil || a.Stub {
			continue
		}
		zr, err := gzip.NewReader(bytes.NewReader(a.Data))
		if err != nil {
			return fmt.Errorf("attachment %q of %q: stored gzip bytes do not decode: %w", a.Name, shortID(doc.ID), err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil {
			return fmt.Errorf("attachment %q of %q: stored gzip bytes do not decode: %w", a.Name, shortID(doc.ID), err)
		}
		a.Data, a.Encoding, a.EncodedLength, a.Digest, a.Length = plain, "", 0, "", int64(len(plain))
	}
	return nil
}

// appendJSON appends the document to a `new_edits=false` `_bulk_docs`
// body (comma first unless first). CouchDB wants a `_rev` on every
// document there: a `_local` one's "0-0" stores it (new or not) as
// "0-1". PouchDB Server refuses a `_rev` for a `_local` document that
// does not exist and stores one without as "0-1".
func (l *localDoc) appendJSON(dst []byte, v Vendor, comma bool) []byte {
	if comma {
		dst = append(dst, ',')
	}
	id, _ := json.Marshal(l.id)
	dst = append(dst, `{"_id":`...)
	dst = append(dst, id...)
	if v != VendorPouchDB {
		dst = append(dst, `,"_rev":"0-0"`...)
	}
	if inner := bytes.TrimSpace(l.body[1 : len(l.body)-1]); len(inner) > 0 {
		dst = append(dst, ',')
		dst = append(dst, inner...)
	}
	return append(dst, '}')
}
