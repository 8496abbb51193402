// Package jsonx holds small JSON helpers: over jsontext, for the hot path,
// reading numbers from tokens without panics and quoting strings into byte
// buffers without allocation; Same, comparing two JSON values; and
// walkers of JSON already known valid (SkipSpace, StringEnd, ValueEnd,
// Plain), for hot paths that look at a few members of a validated value.
package jsonx

import (
	"github.com/go-json-experiment/json/jsontext"
)

// Int returns the integer value of a number token; ok is false for any other
// kind of token or a number that is not an integer in int64 range.
func Int(t jsontext.Token) (int64, bool) {
	if t.Kind() != '0' {
		return 0, false
	}
	n, err := t.Int()
	return n, err == nil
}

// Quote appends s as a JSON string literal. Invalid UTF-8 is kept as the
// replacement character rather than failing, so it never errors.
func Quote(dst []byte, s string) []byte {
	out, err := jsontext.AppendQuote(dst, s)
	if err != nil {
		// AppendQuote only fails on invalid UTF-8 and still returns the
		// quoted form with replacement characters.
		return out
	}
	return out
}

// Unquote returns the string value of a JSON string literal; for anything
// that is not a valid string literal it returns the input as text.
func Unquote(b []byte) string {
	v, err := jsontext.AppendUnquote(nil, b)
	if err != nil {
		return string(b)
	}
	return string(v)
}
