package couch

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"hash"
	"io"
	"net/url"
	"strings"

	"github.com/sofadb/sofa/replicate"
)

var (
	_ replicate.AttachmentOpener = (*DB)(nil)
	_ replicate.StreamWriter     = (*DB)(nil)
)

// StreamReader returns a reader over the whole body in which every
// attachment marked Stream is read from open when the reader reaches it;
// its byte count and md5 digest are checked at its end. Close closes what
// was opened.
func (b *RelatedBody) StreamReader(open func(*replicate.Attachment) (io.ReadCloser, error)) io.ReadCloser {
	s := &streamBody{}
	rs := make([]io.Reader, len(b.chunks))
	for i, c := range b.chunks {
		if a, ok := b.streams[i]; ok {
			l := &lazyAtt{att: a, open: open}
			s.lazy = append(s.lazy, l)
			rs[i] = l
			continue
		}
		rs[i] = bytes.NewReader(c)
	}
	s.Reader = io.MultiReader(rs...)
	return s
}

type streamBody struct {
	io.Reader
	lazy []*lazyAtt
}

func (s *streamBody) Close() error {
	for _, l := range s.lazy {
		l.close()
	}
	return nil
}

// lazyAtt opens its attachment on the first read and checks length and
// md5 at its end, so corrupt or short bytes fail the request instead of
// being stored.
type lazyAtt struct {
	att  *replicate.Attachment
	open func(*replicate.Attachment) (io.ReadCloser, error)
	rc   io.ReadCloser
	sum  hash.Hash
	n    int64
	done bool
}

func (l *lazyAtt) Read(p []byte) (int, error) {
	if l.done {
		return 0, io.EOF
	}
	if l.rc == nil {
		rc, err := l.open(l.att)
		if err != nil {
			return 0, err
		}
		l.rc, l.sum = rc, md5.New()
	}
	want := l.att.StoredLength()
	if rest := want - l.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	if len(p) == 0 {
		return l.finish()
	}
	n, err := l.rc.Read(p)
	l.n += int64(n)
	l.sum.Write(p[:n])
	if err == io.EOF {
		if l.n < want {
			return n, fmt.Errorf("attachment %q: the source sent %d of %d bytes", l.att.Name, l.n, want)
		}
		err = nil
	}
	return n, err
}

func (l *lazyAtt) finish() (int, error) {
	l.done = true
	l.close()
	if d := l.att.Digest; strings.HasPrefix(d, "md5-") {
		if got := base64.StdEncoding.EncodeToString(l.sum.Sum(nil)); got != d[4:] {
			return 0, fmt.Errorf("attachment %q: bytes do not match digest %s", l.att.Name, d)
		}
	}
	return 0, io.EOF
}

func (l *lazyAtt) close() {
	if l.rc != nil {
		l.rc.Close()
		l.rc = nil
	}
}

// OpenAttachment streams one attachment's stored bytes (`GET
// /db/doc/att?rev=R`; gzip-stored ones stay gzip on CouchDB). The caller
// closes the reader. An attachment that is gone wraps
// replicate.ErrUnreadable.
func (d *DB) OpenAttachment(ctx context.Context, docID, rev string, att *replicate.Attachment) (io.ReadCloser, error) {
	h := map[string][]string{"Accept-Encoding": {"gzip"}}
	if d.srv.Vendor == VendorPouchDB {
		h["Accept-Encoding"] = []string{"identity"}
	}
	p := d.path + "/" + EscapeDocID(docID) + "/" + EscapeAttName(att.Name)
	if len(p) > maxURLPath {
		return nil, fmt.Errorf("%w: attachment %q of %q: URL too long to stream", replicate.ErrUnreadable, att.Name, shortID(docID))
	}
	resp, err := d.srv.do(ctx, &request{Method: "GET", Path: p, Query: "rev=" + url.QueryEscape(rev), Accept: "*/*", Header: h, Stream: true})
	if err != nil {
		if st := StatusOf(err); st == 404 || st == 400 || st == 414 {
			return nil, fmt.Errorf("%w: attachment %q of %q rev %s: %w", replicate.ErrUnreadable, att.Name, shortID(docID), rev, err)
		}
		return nil, d.fail("read attachment "+att.Name+" of "+shortID(docID), err)
	}
	enc := resp.Header.Get("Content-Encoding")
	if enc != att.Encoding && !(enc == "identity" && att.Encoding == "") {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: attachment %q of %q: sent with encoding %q, stored as %q", d, att.Name, shortID(docID), enc, att.Encoding)
	}
	return resp.Body, nil
}

// CanStream: CouchDB takes any stored bytes in a multipart/related PUT;
// PouchDB Server only identity bytes (it would store gzip bytes as the
// content).
func (d *DB) CanStream(att *replicate.Attachment) bool {
	return att.Encoding == "" || d.srv.Vendor != VendorPouchDB
}

// WriteStreamed writes one revision as a multipart/related `PUT
// ?new_edits=false` whose Stream attachments are piped from open (nil
// when none is marked Stream); a retried request opens them again. The
// other attachment bytes are sent from doc without being copied. Per-document refusals come back as a
// DocError, like WriteDocs.
func (d *DB) WriteStreamed(ctx context.Context, doc *replicate.Doc, open func(*replicate.Attachment) (io.ReadCloser, error)) (*replicate.DocError, error) {
	if d.srv.Vendor == VendorPouchDB {
		// PouchDB Server stores a part's bytes as they come (gzip bytes
		// as the content) and cannot match a part whose name holds a
		// backslash (see appendFilename): such a revision goes inline.
		if err := decodeGzipAtts(doc); err != nil {
			return nil, err
		}
		if !namesCarried(doc) {
			return d.writeInline(ctx, doc, open)
		}
	}
	body := NewRelatedBody(doc)
	r := &request{Method: "PUT", Path: d.path + "/" + EscapeDocID(doc.ID), Query: "new_edits=false",
		ContentType: body.ContentType(), BodyLen: body.Len(),
		BodyFn: func() (io.ReadCloser, error) { return body.StreamReader(open), nil }}
	resp, err := d.srv.do(ctx, r)
	if err != nil {
		var e *Error
		if asError(err, &e) && !(e.Status == 401 && badCredentials(e.Reason)) {
			// (a wrong password is the request's refusal, not the
			// document's: a validate_doc_update's 401 has its own reason)
			switch e.Status {
			case 400, 401, 403, 409, 412, 413, 415:
				name := e.Name
				if name == "" {
					name = fmt.Sprintf("http_%d", e.Status)
				}
				reason := e.Reason
				if e.Status == 413 {
					// The request's size was refused, not the document:
					// the status names the limit to raise (the server's
					// max_http_request_size or a proxy's), as the reason
					// of a refused _bulk_docs request does.
					reason = fmt.Sprintf("HTTP 413: %s", e.Reason)
				}
				return &replicate.DocError{ID: doc.ID, Rev: doc.Rev, Error: name, Reason: reason}, nil
			}
		}
		return nil, d.fail("PUT "+shortID(doc.ID), err)
	}
	resp.Body.Close()
	return nil, nil
}

func namesCarried(doc *replicate.Doc) bool {
	for _, a := range doc.Atts {
		if !a.Stub && !filenameCarried(a.Name) {
			return false
		}
	}
	return true
}

// writeInline writes one revision in a `_bulk_docs` request with its
// attachment bytes inline, reading those marked Stream from open first
// (held whole: this is for the rare name a multipart part cannot carry).
func (d *DB) writeInline(ctx context.Context, doc *replicate.Doc, open func(*replicate.Attachment) (io.ReadCloser, error)) (*replicate.DocError, error) {
	for _, a := range doc.Atts {
		if !a.Stream {
			continue
		}
		l := &lazyAtt{att: a, open: open} // length and md5 checked
		data, err := io.ReadAll(l)
		l.close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", shortID(doc.ID), err)
		}
		a.Data, a.Stream = data, false
	}
	fails, err := d.bulkDocs(ctx, []*replicate.Doc{doc}, nil)
	if err != nil || len(fails) == 0 {
		return nil, err
	}
	return &fails[0], nil
}
