package couch

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// Helpers shared by the envelope parsers. They walk answers token by token
// with a jsontext.Decoder and copy out only what the caller keeps.

// decoderOpts are the options of every envelope decoder. Envelopes are
// trusted to have unique names only as far as the fields we read:
// duplicate-name tracking costs an allocation per object and buys nothing
// here. Strings may hold invalid UTF-8 or escaped lone surrogates
// ("\ud800", which PouchDB Server stores): bodies are raw bytes carried
// as they are, and one such string must not stop a feed.
var decoderOpts = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

func newDecoder(r io.Reader) *jsontext.Decoder {
	return jsontext.NewDecoder(r, decoderOpts...)
}

// errShape reports an answer whose JSON is valid but not the expected shape.
var errShape = errors.New("unexpected JSON shape")

// malformed reports whether err says a complete answer was not JSON of
// the expected shape (a syntax error other than a truncation, or
// errShape): a server sends the same bytes again, so retrying is useless.
// A cut connection (I/O error, unexpected EOF) is not malformed.
func malformed(err error) bool {
	if err == nil || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return false
	}
	var se *jsontext.SyntacticError
	return errors.As(err, &se) || errors.Is(err, errShape)
}

func shapeErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errShape, fmt.Sprintf(format, args...))
}

// expectDelim reads one token that must be the given delimiter ('{', '[',
// '}' or ']').
func expectDelim(dec *jsontext.Decoder, want jsontext.Kind) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != want {
		return shapeErr("got %v, want %v", tok.Kind(), want)
	}
	return nil
}

// readString reads a string value; what names the field in errors.
func readString(dec *jsontext.Decoder, what string) (string, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return "", err
	}
	if tok.Kind() != '"' {
		return "", shapeErr("%s is %v, not a string", what, tok.Kind())
	}
	return tok.String(), nil
}

// readStringOrNull reads a string value, or null as "".
func readStringOrNull(dec *jsontext.Decoder, what string) (string, error) {
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		return "", err
	}
	return readString(dec, what)
}

// readBool reads any value and reports whether it is the literal true.
func readBool(dec *jsontext.Decoder) (bool, error) {
	v, err := dec.ReadValue()
	if err != nil {
		return false, err
	}
	return string(v) == "true", nil
}

// readRaw reads any value and returns a copy of its bytes; null gives nil.
func readRaw(dec *jsontext.Decoder) ([]byte, error) {
	v, err := dec.ReadValue()
	if err != nil {
		return nil, err
	}
	if v.Kind() == 'n' {
		return nil, nil
	}
	return bytes.Clone(v), nil
}

// readStrings reads an array of strings (null gives nil).
func readStrings(dec *jsontext.Decoder, what string) ([]string, error) {
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		return nil, err
	}
	if err := expectDelim(dec, '['); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var out []string
	for dec.PeekKind() != ']' {
		s, err := readString(dec, what)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	_, err := dec.ReadToken()
	return out, err
}

// eofAsUnexpected turns a clean io.EOF met inside a value into
// io.ErrUnexpectedEOF, so a cut answer is never mistaken for a complete one.
func eofAsUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
