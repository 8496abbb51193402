package couch

import (
	"io"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sofadb/sofa/replicate"
)

// ReadBulkGet reads a JSON `_bulk_get` answer from r,
// `{"results":[{"id":ID,"docs":[ENTRY,...]},...]}`, and calls fn for every
// revision read, as soon as it is parsed (replicate.ParseDoc; inline
// attachment data is decoded). One result may hold several docs (`latest`
// on a branched rev). reqs is the request, in order; it fills in the id and
// rev of errors that lack them and may be nil.
//
// Per-revision failures come back as DocErrors, in answer order. Entry
// shapes understood:
//
//	{"ok":{doc}}
//	{"error":{"id","rev","error","reason"}}   CouchDB
//	{"error":"not_found","reason":"missing"}  flat, id/rev from the request
//	{"missing":"1-abc"}                       PouchDB Server
//	{}                                        PouchDB Server, doc not found
//
// A revision whose JSON is not a valid document (no `_id`, bad
// `_attachments`) is a DocError with Error "bad_doc". An error from fn
// stops the parse and is returned. A whole-answer CouchDB error object
// gives an *Error with Status 0 (Name and Reason set); a cut or malformed answer gives an error
// wrapping the cause.
func ReadBulkGet(r io.Reader, reqs []replicate.RevRequest, fn func(*replicate.Doc) error) ([]replicate.DocError, error) {
	// An answer is parsed in place: every revision is copied out by
	// replicate.ParseDocValid, every other value kept is a new string.
	p := bulkGetParser{dec: newDecoder(inPlace(r)), reqs: reqs, fn: fn}
	err := p.parse()
	if err != nil && !p.fnErr {
		if ce, ok := err.(*Error); ok {
			return p.errs, ce
		}
		return p.errs, wrapParse("_bulk_get answer", err)
	}
	return p.errs, err
}

// ParseBulkGet is ReadBulkGet collecting the revisions in answer order.
func ParseBulkGet(r io.Reader, reqs []replicate.RevRequest) ([]*replicate.Doc, []replicate.DocError, error) {
	var docs []*replicate.Doc
	errs, err := ReadBulkGet(r, reqs, func(d *replicate.Doc) error {
		docs = append(docs, d)
		return nil
	})
	return docs, errs, err
}

type bulkGetParser struct {
	dec   *jsontext.Decoder
	reqs  []replicate.RevRequest
	fn    func(*replicate.Doc) error
	errs  []replicate.DocError
	fnErr bool
}

func (p *bulkGetParser) parse() error {
	dec := p.dec
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	var couchErr Error
	for dec.PeekKind() != '}' {
		kt, err := dec.ReadToken()
		if err != nil {
			return err
		}
		switch kt.String() {
		case "results":
			if err := expectDelim(dec, '['); err != nil {
				return err
			}
			for i := 0; dec.PeekKind() != ']'; i++ {
				if err := p.result(i); err != nil {
					return err
				}
			}
			if _, err := dec.ReadToken(); err != nil {
				return err
			}
		case "error":
			couchErr.Name, err = readScalarText(dec)
		case "reason":
			couchErr.Reason, err = readScalarText(dec)
		default:
			err = dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	if couchErr.Name != "" {
		return &couchErr
	}
	return nil
}

// result reads `{"id":ID,"docs":[...]}`, the i-th result of the answer.
func (p *bulkGetParser) result(i int) error {
	dec := p.dec
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	firstErr := len(p.errs)
	id := ""
	for dec.PeekKind() != '}' {
		kt, err := dec.ReadToken()
		if err != nil {
			return err
		}
		switch kt.String() {
		case "id":
			id, err = readStringOrNull(dec, "id")
		case "docs":
			err = p.docs()
		default:
			err = dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	// Errors of this result may have been read before its id.
	rev := requestRev(p.reqs, i, id)
	for j := firstErr; j < len(p.errs); j++ {
		e := &p.errs[j]
		if e.ID == "" {
			e.ID = id
		}
		if e.Rev == "" || e.Rev == "undefined" {
			if rev != "" {
				e.Rev = rev
			}
		}
	}
	return nil
}

// requestRev returns the rev asked for the i-th result with the given id:
// reqs[i] when it names that id (CouchDB answers in request order), else
// the first request for the id.
func requestRev(reqs []replicate.RevRequest, i int, id string) string {
	if i < len(reqs) && (reqs[i].ID == id || id == "") {
		return reqs[i].Rev
	}
	for _, r := range reqs {
		if r.ID == id {
			return r.Rev
		}
	}
	return ""
}

func (p *bulkGetParser) docs() error {
	dec := p.dec
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	for dec.PeekKind() != ']' {
		if err := p.entry(); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// entry reads one element of a result's docs.
func (p *bulkGetParser) entry() error {
	dec := p.dec
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	var (
		de        replicate.DocError
		isErr     bool
		gotOK     bool
		flatError bool
	)
	for dec.PeekKind() != '}' {
		kt, err := dec.ReadToken()
		if err != nil {
			return err
		}
		switch kt.String() {
		case "ok":
			v, err := dec.ReadValue()
			if err != nil {
				return err
			}
			gotOK = true
			doc, perr := replicate.ParseDocValid(v)
			if perr != nil {
				isErr = true
				de.Error, de.Reason = "bad_doc", perr.Error()
				continue
			}
			if err := p.fn(doc); err != nil {
				p.fnErr = true
				return err
			}
		case "error":
			isErr = true
			if dec.PeekKind() == '{' {
				if err := readDocError(dec, &de); err != nil {
					return err
				}
			} else {
				flatError = true
				if de.Error, err = readScalarText(dec); err != nil {
					return err
				}
			}
		case "reason":
			s, err := readScalarText(dec)
			if err != nil {
				return err
			}
			if flatError || de.Reason == "" {
				de.Reason = s
			}
		case "missing":
			isErr = true
			rev, err := readScalarText(dec)
			if err != nil {
				return err
			}
			de.Rev, de.Error, de.Reason = rev, "not_found", "missing"
		case "id":
			if de.ID, err = readScalarText(dec); err != nil {
				return err
			}
		case "rev":
			if de.Rev, err = readScalarText(dec); err != nil {
				return err
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return err
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	if !gotOK && !isErr {
		// PouchDB Server answers {} for a document that does not exist.
		isErr = true
		de.Error, de.Reason = "not_found", "missing"
	}
	if isErr {
		p.errs = append(p.errs, de)
	}
	return nil
}

// readDocError reads CouchDB's `{"id","rev","error","reason"}`.
func readDocError(dec *jsontext.Decoder, de *replicate.DocError) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		kt, err := dec.ReadToken()
		if err != nil {
			return err
		}
		var dst *string
		switch kt.String() {
		case "id":
			dst = &de.ID
		case "rev":
			dst = &de.Rev
		case "error":
			dst = &de.Error
		case "reason":
			dst = &de.Reason
		default:
			if err := dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		if *dst, err = readScalarText(dec); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}
