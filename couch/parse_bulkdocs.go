package couch

import (
	"io"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sofadb/sofa/replicate"
)

// ParseBulkDocs reads a `_bulk_docs` answer and returns the revisions that
// were not written. CouchDB 2.x/3.x answers a `new_edits=false` write with
// only the failures (`[]` when all were written); PouchDB Server answers
// one entry per document, successes as `{"ok":true,"id","rev"}`. Failures
// are entries carrying "error": `{"id","rev","error","reason"}`, or the
// PouchDB form `{"id","error":true,"name","message"}`.
//
// Entries are matched to the request by id and rev, never by position.
// sent is the request's documents: a failure that names an id but no rev is
// reported once for every sent revision of that id (the answer does not say
// which one failed; a retry of a written revision is harmless). sent may be
// nil, leaving such revs empty.
//
// A whole-answer CouchDB error object gives an *Error with Status 0 (Name and Reason set); a cut
// or malformed answer gives an error wrapping the cause.
func ParseBulkDocs(r io.Reader, sent []*replicate.Doc) ([]replicate.DocError, error) {
	dec := newDecoder(r)
	var out []replicate.DocError
	switch dec.PeekKind() {
	case '[':
	case '{':
		return nil, readErrorObject(dec, "_bulk_docs answer")
	default:
		_, err := dec.ReadToken()
		if err == nil {
			err = shapeErr("not an array")
		}
		return nil, wrapParse("_bulk_docs answer", err)
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, wrapParse("_bulk_docs answer", err)
	}
	for dec.PeekKind() != ']' {
		var (
			de            replicate.DocError
			failed        bool
			name, message string
		)
		if err := expectDelim(dec, '{'); err != nil {
			return out, wrapParse("_bulk_docs answer", err)
		}
		for dec.PeekKind() != '}' {
			kt, err := dec.ReadToken()
			if err != nil {
				return out, wrapParse("_bulk_docs answer", err)
			}
			var dst *string
			switch kt.String() {
			case "id":
				dst = &de.ID
			case "rev":
				dst = &de.Rev
			case "error":
				failed = dec.PeekKind() != 'f' && dec.PeekKind() != 'n'
				dst = &de.Error
			case "reason":
				dst = &de.Reason
			case "name":
				dst = &name
			case "message":
				dst = &message
			default:
				if err := dec.SkipValue(); err != nil {
					return out, wrapParse("_bulk_docs answer", err)
				}
				continue
			}
			if *dst, err = readScalarText(dec); err != nil {
				return out, wrapParse("_bulk_docs answer", err)
			}
		}
		if _, err := dec.ReadToken(); err != nil {
			return out, wrapParse("_bulk_docs answer", err)
		}
		if !failed {
			continue
		}
		if de.Error == "true" && name != "" { // PouchDB's raw error object
			de.Error = name
		}
		if de.Reason == "" {
			de.Reason = message
		}
		out = appendFailure(out, de, sent)
	}
	if _, err := dec.ReadToken(); err != nil {
		return out, wrapParse("_bulk_docs answer", err)
	}
	return out, nil
}

// appendFailure appends de, or, when de has no rev, one copy per sent
// revision of de.ID.
func appendFailure(out []replicate.DocError, de replicate.DocError, sent []*replicate.Doc) []replicate.DocError {
	if de.Rev != "" {
		return append(out, de)
	}
	n := len(out)
	for _, d := range sent {
		if d.ID == de.ID {
			e := de
			e.Rev = d.Rev
			out = append(out, e)
		}
	}
	if len(out) == n {
		out = append(out, de)
	}
	return out
}

// ParseRevsDiff reads a `_revs_diff` answer,
// `{ID:{"missing":[rev,...],"possible_ancestors":[rev,...]},...}`, into a
// map by document id. Ids whose missing list is empty are left out. A
// CouchDB error object (`{"error":"...","reason":"..."}`, told apart from a
// document named "error" by its string value) gives an *Error with Status
// 0.
func ParseRevsDiff(r io.Reader) (map[string]replicate.Missing, error) {
	dec := newDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return nil, wrapParse("_revs_diff answer", err)
	}
	out := make(map[string]replicate.Missing)
	var couchErr Error
	for dec.PeekKind() != '}' {
		kt, err := dec.ReadToken()
		if err != nil {
			return nil, wrapParse("_revs_diff answer", err)
		}
		id := kt.String()
		if k := dec.PeekKind(); k != '{' {
			if k == '"' && (id == "error" || id == "reason") {
				s, err := readScalarText(dec)
				if err != nil {
					return nil, wrapParse("_revs_diff answer", err)
				}
				if id == "error" {
					couchErr.Name = s
				} else {
					couchErr.Reason = s
				}
				continue
			}
			if err := dec.SkipValue(); err != nil {
				return nil, wrapParse("_revs_diff answer", err)
			}
			continue
		}
		m, err := readMissing(dec)
		if err != nil {
			return nil, wrapParse("_revs_diff answer: "+id, err)
		}
		if len(m.Missing) > 0 {
			out[id] = m
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, wrapParse("_revs_diff answer", err)
	}
	if couchErr.Name != "" {
		return nil, &couchErr
	}
	return out, nil
}

func readMissing(dec *jsontext.Decoder) (replicate.Missing, error) {
	var m replicate.Missing
	if err := expectDelim(dec, '{'); err != nil {
		return m, err
	}
	for dec.PeekKind() != '}' {
		kt, err := dec.ReadToken()
		if err != nil {
			return m, err
		}
		switch kt.String() {
		case "missing":
			m.Missing, err = readStrings(dec, "missing")
		case "possible_ancestors":
			m.PossibleAncestors, err = readStrings(dec, "possible_ancestors")
		default:
			err = dec.SkipValue()
		}
		if err != nil {
			return m, err
		}
	}
	_, err := dec.ReadToken()
	return m, err
}

// readErrorObject reads an object expected to be a CouchDB error and
// returns it as an *Error, or a parse error naming what.
func readErrorObject(dec *jsontext.Decoder, what string) error {
	v, err := dec.ReadValue()
	if err != nil {
		return wrapParse(what, err)
	}
	var e Error
	if err := parseErrorBody(v, &e); err != nil {
		return wrapParse(what, shapeErr("object without an error member"))
	}
	return &e
}
