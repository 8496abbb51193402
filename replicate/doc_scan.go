package replicate

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/sofadb/sofa/internal/jsonx"
)

// The scanner below walks a revision's top-level members in JSON already
// known to be valid (jsontext checked it: ParseDoc validates first, and a
// value a jsontext.Decoder returned is valid). It only finds where keys and
// values end, jumping over strings with bytes.IndexByte, so a body is
// checked once and walked once instead of being tokenized twice. On input
// that is not valid JSON it returns an error or a wrong result, never
// panics.

var errScan = errors.New("parse doc: malformed JSON")

// Envelope names, as bits: each may appear once at the top level.
const (
	keyID = 1 << iota
	keyRev
	keyDeleted
	keyRevisions
	keyAttachments
)

// envelopeKey maps a quoted member name to its bit, 0 for other names.
func envelopeKey(quoted []byte) int {
	name := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		name = []byte(stringValue(quoted))
	}
	switch string(name) {
	case "_id":
		return keyID
	case "_rev":
		return keyRev
	case "_deleted":
		return keyDeleted
	case "_revisions":
		return keyRevisions
	case "_attachments":
		return keyAttachments
	}
	return 0
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// endString returns the index just past the string literal whose opening
// quote is b[i], or -1.
func endString(b []byte, i int) int {
	j := i + 1
	for j <= len(b) {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		n := 0 // backslashes right before the quote
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return -1
}

// endValue returns the index just past the JSON value starting at b[i], or
// -1.
func endValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return endString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := endString(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i // number, true, false, null
	for ; j < len(b); j++ {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r', ':':
			if j == i {
				return -1
			}
			return j
		}
	}
	return j
}

// stringValue returns the content of the string literal v, as
// jsontext.Token.String gives it (escapes decoded, invalid UTF-8 replaced).
func stringValue(v []byte) string {
	if s := v[1 : len(v)-1]; bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		return string(s)
	}
	pd := getDecoder(v)
	defer putDecoder(pd)
	tok, err := pd.dec.ReadToken()
	if err != nil {
		return jsonx.Unquote(v)
	}
	return tok.String()
}

// scanDoc parses the envelope of raw, one valid JSON object with no
// surrounding whitespace (see ParseDoc).
func scanDoc(raw []byte) (*Doc, error) {
	if len(raw) < 2 || raw[0] != '{' {
		return nil, fmt.Errorf("parse doc: not a JSON object")
	}
	d := &Doc{}
	attStart, attEnd := -1, -1
	seen := 0
	prevEnd := 1 // just after '{', then just after the previous value
	i := skipWS(raw, 1)
	for first := true; ; first = false {
		if i >= len(raw) {
			return nil, errScan
		}
		if raw[i] == '}' {
			if skipWS(raw, i+1) != len(raw) {
				return nil, fmt.Errorf("parse doc: data after the object")
			}
			break
		}
		if !first {
			if raw[i] != ',' {
				return nil, errScan
			}
			i = skipWS(raw, i+1)
		}
		if i >= len(raw) || raw[i] != '"' {
			return nil, errScan
		}
		memberStart := prevEnd
		ke := endString(raw, i)
		if ke < 0 {
			return nil, errScan
		}
		key := raw[i:ke]
		i = skipWS(raw, ke)
		if i >= len(raw) || raw[i] != ':' {
			return nil, errScan
		}
		i = skipWS(raw, i+1)
		ve := endValue(raw, i)
		if ve < 0 {
			return nil, errScan
		}
		v := raw[i:ve]
		bit := envelopeKey(key)
		if bit != 0 {
			if seen&bit != 0 {
				return nil, fmt.Errorf("parse doc: duplicate %s", key)
			}
			seen |= bit
		}
		switch bit {
		case keyID, keyRev:
			if v[0] != '"' {
				return nil, fmt.Errorf("parse doc: %s is not a string", key)
			}
			if bit == keyID {
				d.ID = stringValue(v)
			} else {
				d.Rev = stringValue(v)
			}
		case keyDeleted:
			d.Deleted = string(v) == "true"
		case keyRevisions:
			if err := parseRevisions(v, &d.Revisions); err != nil {
				return nil, err
			}
		case keyAttachments:
			atts, err := parseAttachments(v)
			if err != nil {
				return nil, err
			}
			d.Atts = atts
			attStart, attEnd = memberStart, ve
		}
		prevEnd = ve
		i = skipWS(raw, ve)
	}
	if d.ID == "" {
		return nil, fmt.Errorf("parse doc: no _id")
	}
	if attStart < 0 {
		d.Body = append([]byte(nil), raw...)
	} else {
		d.Body = spliceOut(raw, attStart, attEnd)
	}
	if len(d.Revisions.IDs) == 0 && d.Rev != "" {
		if g := Generation(d.Rev); g > 0 {
			d.Revisions = Revisions{Start: g, IDs: []string{d.Rev[bytes.IndexByte([]byte(d.Rev), '-')+1:]}}
		}
	}
	return d, nil
}
