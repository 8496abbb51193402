package couch

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
)

// ParseError builds an *Error (Status, Name, Reason; the caller adds Method
// and Path) from an HTTP status and the answer's body,
// `{"error":"not_found","reason":"missing"}`. A body that is not a CouchDB
// error object (an HTML page from a proxy, an empty body) still gives an
// *Error carrying the status, with Reason holding at most the first 200
// bytes of the body as text (invalid UTF-8 replaced).
func ParseError(status int, body []byte) *Error {
	e := &Error{Status: status}
	if err := parseErrorBody(body, e); err != nil {
		t := bytes.TrimSpace(body)
		if len(t) > 200 {
			t = append(t[:200:200], "..."...)
		}
		e.Reason = string(bytes.ToValidUTF8(t, []byte("?")))
	}
	return e
}

func parseErrorBody(body []byte, e *Error) error {
	dec := newDecoder(bytes.NewReader(body))
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	found := false
	for dec.PeekKind() != '}' {
		kt, err := dec.ReadToken()
		if err != nil {
			return err
		}
		switch kt.String() {
		case "error":
			v, err := readScalarText(dec)
			if err != nil {
				return err
			}
			e.Name, found = v, true
		case "reason":
			v, err := readScalarText(dec)
			if err != nil {
				return err
			}
			e.Reason = v
		default:
			if err := dec.SkipValue(); err != nil {
				return err
			}
		}
	}
	if !found {
		return errors.New("no error member")
	}
	return nil
}

// readScalarText reads a value as text: a string's content, or the JSON
// text of anything else (CouchDB sometimes puts an object in "reason").
func readScalarText(dec *jsontext.Decoder) (string, error) {
	v, err := dec.ReadValue()
	if err != nil {
		return "", err
	}
	if v.Kind() == '"' {
		s, err := jsontext.AppendUnquote(nil, v)
		if err != nil {
			return "", err
		}
		return string(s), nil
	}
	return string(v), nil
}

// wrapParse wraps the error of a failed parse, prefixed with what was being
// parsed; a clean EOF inside a value becomes io.ErrUnexpectedEOF.
func wrapParse(what string, err error) error {
	return fmt.Errorf("parse %s: %w", what, eofAsUnexpected(err))
}
