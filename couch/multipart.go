package couch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/textproto"
	"strings"

	"github.com/sofadb/sofa/replicate"
)

// Readers for CouchDB's multipart answers. Both `_bulk_get` (2.3+, Accept:
// multipart/mixed) and `GET doc?open_revs=[...]` answer multipart/mixed with
// one outer part per revision:
//
//	application/json                a revision without attachment bytes
//	multipart/related; boundary=B   the revision's JSON, then one part per
//	                                attachment marked "follows":true, in the
//	                                stored encoding (Content-Encoding: gzip)
//	application/json; error="true"  {"missing":rev} (open_revs) or
//	                                {"rev","error","reason"} (_bulk_get)
//
// `_bulk_get` outer parts also carry X-Doc-Id and X-Rev-Id headers.

// ReadBulkGetMultipart reads a `_bulk_get` answer whose Content-Type is
// contentType and calls fn for every revision as soon as it and its
// attachment bytes are read (Attachment.Data filled, bytes as sent). A
// non-multipart contentType is read as JSON by ReadBulkGet, so the caller
// may pass any 200 answer here. reqs is the request, in order; it names the
// document of error parts, which carry only a rev. Per-revision failures
// come back as DocErrors; the error is for the whole answer (malformed,
// cut, or an error from fn, returned as is).
func ReadBulkGetMultipart(r io.Reader, contentType string, reqs []replicate.RevRequest, fn func(*replicate.Doc) error) ([]replicate.DocError, error) {
	mt, params := mediaType(contentType)
	if !strings.HasPrefix(mt, "multipart/") {
		return ReadBulkGet(r, reqs, fn)
	}
	m := mixedReader{reqs: reqs, fn: fn, bulkGet: true}
	return m.errs, m.read(r, params["boundary"], "_bulk_get answer")
}

// ReadOpenRevs reads the answer to `GET /db/{id}?open_revs=[...]` for
// document id, whose Content-Type is contentType, calling fn for every
// revision read. It takes both multipart/mixed (Apache CouchDB, with
// Accept: multipart/mixed) and the JSON array `[{"ok":doc},{"missing":rev}]`
// (any other content type: PouchDB Server answers the array, as text/plain,
// even when multipart was asked for). Missing revisions come back as
// DocErrors with Error "not_found". Errors as for ReadBulkGetMultipart.
func ReadOpenRevs(r io.Reader, contentType, id string, fn func(*replicate.Doc) error) ([]replicate.DocError, error) {
	mt, params := mediaType(contentType)
	if !strings.HasPrefix(mt, "multipart/") {
		return readOpenRevsJSON(r, id, fn)
	}
	m := mixedReader{reqs: []replicate.RevRequest{{ID: id}}, fn: fn}
	return m.errs, m.read(r, params["boundary"], "open_revs answer")
}

// ParseOpenRevs is ReadOpenRevs collecting the revisions in answer order.
func ParseOpenRevs(r io.Reader, contentType, id string) ([]*replicate.Doc, []replicate.DocError, error) {
	var docs []*replicate.Doc
	errs, err := ReadOpenRevs(r, contentType, id, func(d *replicate.Doc) error {
		docs = append(docs, d)
		return nil
	})
	return docs, errs, err
}

func readOpenRevsJSON(r io.Reader, id string, fn func(*replicate.Doc) error) ([]replicate.DocError, error) {
	p := bulkGetParser{dec: newDecoder(r), fn: fn}
	err := func() error {
		if p.dec.PeekKind() == '{' {
			return readErrorObject(p.dec, "open_revs answer")
		}
		if err := expectDelim(p.dec, '['); err != nil {
			return err
		}
		for p.dec.PeekKind() != ']' {
			if err := p.entry(); err != nil {
				return err
			}
		}
		_, err := p.dec.ReadToken()
		return err
	}()
	for i := range p.errs {
		if p.errs[i].ID == "" {
			p.errs[i].ID = id
		}
	}
	if err != nil && !p.fnErr {
		if _, ok := err.(*Error); ok {
			return p.errs, err
		}
		return p.errs, wrapParse("open_revs answer", err)
	}
	return p.errs, err
}

// mixedReader walks one multipart/mixed answer.
type mixedReader struct {
	reqs    []replicate.RevRequest
	fn      func(*replicate.Doc) error
	bulkGet bool // error parts are {"rev","error","reason"}, not {"missing"}
	errs    []replicate.DocError
	next    int // first request not yet matched to a part
	docs    int // revisions delivered
	fnErr   bool
	br      *bufio.Reader
}

func (m *mixedReader) read(r io.Reader, boundary, what string) error {
	if boundary == "" {
		return fmt.Errorf("parse %s: multipart content type without boundary", what)
	}
	src := &eofTracker{r: r}
	mr := multipart.NewReader(src, boundary)
	for {
		part, err := mr.NextRawPart()
		if err == io.EOF && !src.endedAt(boundary) {
			err = io.ErrUnexpectedEOF
		}
		if err == io.EOF {
			return nil
		}
		if err == nil {
			err = m.part(part)
		}
		if err != nil {
			if m.fnErr {
				return err
			}
			return fmt.Errorf("parse %s after %d revisions: %w", what, m.docs, eofAsUnexpected(err))
		}
	}
}

func (m *mixedReader) part(part *multipart.Part) error {
	mt, params := mediaType(part.Header.Get("Content-Type"))
	if m.br == nil {
		m.br = bufio.NewReaderSize(part, 16<<10)
	} else {
		m.br.Reset(part)
	}
	body := m.br
	switch {
	case strings.EqualFold(params["error"], "true"):
		raw, err := io.ReadAll(body)
		if err != nil {
			return err
		}
		return m.errorPart(part.Header, raw)
	case strings.HasPrefix(mt, "multipart/") && !startsJSON(body):
		// CouchDB announces multipart/related for a revision whose
		// attachments are all stubs, then sends plain JSON: startsJSON
		// sends that case to the JSON branch.
		d, err := readRelated(body, params["boundary"])
		if err != nil {
			return err
		}
		return m.deliver(d)
	default:
		raw, err := io.ReadAll(body)
		if err != nil {
			return err
		}
		d, perr := replicate.ParseDoc(raw)
		if perr != nil {
			// An error part sent without its error="true" marker?
			if (bytes.Contains(raw, []byte(`"missing"`)) || bytes.Contains(raw, []byte(`"error"`))) &&
				m.errorPart(part.Header, raw) == nil {
				return nil
			}
			return perr
		}
		return m.deliver(d)
	}
}

// startsJSON reports whether the next non-space byte of br is '{'.
func startsJSON(br *bufio.Reader) bool {
	for n := 1; n <= 64; n++ {
		b, _ := br.Peek(n)
		if len(b) < n {
			return false
		}
		switch c := b[n-1]; c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		default:
			return false
		}
	}
	return false
}

func (m *mixedReader) deliver(d *replicate.Doc) error {
	for j := m.next; j < len(m.reqs); j++ {
		if m.reqs[j].ID == d.ID {
			m.next = j + 1
			break
		}
	}
	if err := m.fn(d); err != nil {
		m.fnErr = true
		return err
	}
	m.docs++
	return nil
}

// errorPart reads `{"missing":rev}` or `{"id","rev","error","reason"}`
// (flat or nested under "error") and records it.
func (m *mixedReader) errorPart(h textproto.MIMEHeader, raw []byte) error {
	p := bulkGetParser{dec: newDecoder(bytes.NewReader(raw)), fn: func(*replicate.Doc) error {
		return errors.New("revision in an error part")
	}}
	if err := p.entry(); err != nil {
		return err
	}
	if len(p.errs) != 1 {
		return shapeErr("error part without an error")
	}
	de := p.errs[0]
	if de.ID == "" {
		de.ID = h.Get("X-Doc-Id")
	}
	if de.Rev == "" {
		de.Rev = h.Get("X-Rev-Id")
	}
	if de.ID == "" {
		de.ID = m.matchRev(de.Rev)
	}
	m.errs = append(m.errs, de)
	return nil
}

// matchRev names the document of an error part that carries only a rev:
// the first request at or after the cursor asking for that rev (rev ids
// repeat across documents with identical bodies, so order decides), else
// any request for it, else the only document asked for.
func (m *mixedReader) matchRev(rev string) string {
	for j := m.next; j < len(m.reqs); j++ {
		if m.reqs[j].Rev == rev {
			m.next = j + 1
			return m.reqs[j].ID
		}
	}
	for _, q := range m.reqs {
		if q.Rev == rev {
			return q.ID
		}
	}
	if !m.bulkGet && len(m.reqs) == 1 {
		return m.reqs[0].ID
	}
	return ""
}
