package couch

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/sofadb/sofa/internal/jsonx"
	"github.com/sofadb/sofa/replicate"
)

// Attachment reads one attachment's stored bytes with
// `GET /db/doc/att?rev=R` and `Accept-Encoding: gzip`, so a gzip-stored
// attachment arrives as stored. The bytes are checked against att.Digest
// when it is an md5 digest.
func (d *DB) Attachment(ctx context.Context, docID, rev string, att *replicate.Attachment) error {
	// CouchDB sends a gzip-stored attachment as stored when the client
	// accepts gzip; PouchDB Server stores identity bytes and would only
	// compress on the wire, so it is asked for identity.
	h := map[string][]string{"Accept-Encoding": {"gzip"}}
	if d.srv.Vendor == VendorPouchDB {
		h["Accept-Encoding"] = []string{"identity"}
	}
	p := d.path + "/" + EscapeDocID(docID) + "/" + EscapeAttName(att.Name)
	if len(p) > maxURLPath {
		// Too long for a URL (PouchDB Server refuses over 16 KB): read the
		// revision with its attachments inline, the id in a POST body.
		return d.attachmentInline(ctx, docID, rev, att)
	}
	resp, err := d.srv.do(ctx, &request{Method: "GET", Path: p, Query: "rev=" + url.QueryEscape(rev), Accept: "*/*", Header: h})
	if err != nil {
		if st := StatusOf(err); st == 404 || st == 400 || st == 414 {
			return fmt.Errorf("%w: attachment %q of %q rev %s: %w", replicate.ErrUnreadable, att.Name, shortID(docID), rev, err)
		}
		return d.fail("read attachment "+att.Name+" of "+shortID(docID), err)
	}
	defer resp.Body.Close()
	data, err := readAttachment(resp.Body, att.StoredLength())
	if err != nil {
		return d.fail("read attachment "+att.Name+" of "+shortID(docID), &NetError{Op: "GET attachment", Err: err})
	}
	data, enc, err := storedBytes(data, resp.Header.Get("Content-Encoding"), att)
	if err != nil {
		return fmt.Errorf("%s: attachment %q of %q rev %s: %w", d, att.Name, shortID(docID), rev, err)
	}
	att.Encoding = enc
	if enc != "" {
		att.EncodedLength = int64(len(data))
	}
	att.Data = data
	return nil
}

// attachmentInline reads one attachment through `_bulk_get` with
// attachments=true (base64 in JSON): for documents whose URL is too long.
func (d *DB) attachmentInline(ctx context.Context, docID, rev string, att *replicate.Attachment) error {
	body := []byte(`{"docs":[{"id":`)
	body = jsonx.Quote(body, docID)
	body = append(body, `,"rev":`...)
	body = jsonx.Quote(body, rev)
	body = append(body, `}]}`...)
	resp, err := d.srv.do(ctx, &request{Method: "POST", Path: d.path + "/_bulk_get", Query: "revs=true&attachments=true",
		Body: body, ContentType: "application/json"})
	if err != nil {
		if st := StatusOf(err); st == 404 || st == 400 || st == 405 || st == 413 {
			return fmt.Errorf("%w: attachment %q of %q rev %s: the id is too long for a URL and _bulk_get failed: %w", replicate.ErrUnreadable, att.Name, shortID(docID), rev, err)
		}
		return d.fail("read attachment "+att.Name+" of "+shortID(docID), err)
	}
	defer resp.Body.Close()
	docs, _, err := ParseBulkGet(resp.Body, []replicate.RevRequest{{ID: docID, Rev: rev}})
	if err != nil {
		return fmt.Errorf("%s: _bulk_get: %w", d, err)
	}
	for _, doc := range docs {
		if doc.Rev != rev {
			continue
		}
		for _, a := range doc.Atts {
			if a.Name == att.Name && a.Data != nil {
				data, enc, err := storedBytes(a.Data, "", att)
				if err != nil {
					return fmt.Errorf("%s: attachment %q of %q rev %s: %w", d, att.Name, shortID(docID), rev, err)
				}
				att.Data, att.Encoding = data, enc
				return nil
			}
		}
	}
	return fmt.Errorf("%w: attachment %q of %q rev %s: not in the _bulk_get answer", replicate.ErrUnreadable, att.Name, shortID(docID), rev)
}

// storedBytes decides what bytes an attachment answer carried. CouchDB
// sends a gzip-stored attachment as stored with Content-Encoding: gzip
// (its digest is the md5 of those bytes); PouchDB Server may gzip on the
// wire (the digest is the md5 of the decoded bytes). The digest tells
// which; without an md5 digest, a gzip answer is kept as stored only when
// the stub said so.
func storedBytes(data []byte, contentEncoding string, att *replicate.Attachment) ([]byte, string, error) {
	md5ok := func(b []byte) bool {
		if !strings.HasPrefix(att.Digest, "md5-") {
			return true
		}
		sum := md5.Sum(b)
		return base64.StdEncoding.EncodeToString(sum[:]) == att.Digest[4:]
	}
	if contentEncoding == "gzip" {
		if strings.HasPrefix(att.Digest, "md5-") && md5ok(data) || !strings.HasPrefix(att.Digest, "md5-") && att.Encoding == "gzip" {
			return data, "gzip", nil
		}
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, "", fmt.Errorf("bad gzip answer: %w", err)
		}
		plain, err := io.ReadAll(io.LimitReader(zr, att.Length+1<<20))
		if err != nil {
			return nil, "", fmt.Errorf("bad gzip answer: %w", err)
		}
		data = plain
	}
	if att.Encoding == "gzip" {
		// Asked for stored gzip bytes, got identity ones: the target
		// recomputes encoding and digest.
		att.Digest = ""
		return data, "", nil
	}
	if !md5ok(data) {
		return nil, "", fmt.Errorf("bytes do not match digest %s", att.Digest)
	}
	return data, "", nil
}

// readAttachment returns an attachment's body of about stored bytes, cut
// after stored + 1 MiB + 1 bytes (storedBytes refuses a wrong length): the
// answer's own buffer when the body was read whole (no second copy of
// megabytes), else a read.
func readAttachment(body io.Reader, stored int64) ([]byte, error) {
	limit := stored + 1<<20 + 1
	if b, ok := takeBytes(body); ok {
		return b[:min(int64(len(b)), limit)], nil
	}
	buf := bytes.NewBuffer(make([]byte, 0, stored+512))
	_, err := buf.ReadFrom(io.LimitReader(body, limit))
	return buf.Bytes(), err
}
