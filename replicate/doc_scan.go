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
	i := jsonx.SkipSpace(raw, 1)
	for first := true; ; first = false {
		if i >= len(raw) {
			return nil, errScan
		}
		if raw[i] == '}' {
			if jsonx.SkipSpace(raw, i+1) != len(raw) {
				return nil, fmt.Errorf("parse doc: data after the object")
			}
			break
		}
		if !first {
			if raw[i] != ',' {
				return nil, errScan
			}
			i = jsonx.SkipSpace(raw, i+1)
		}
		if i >= len(raw) || raw[i] != '"' {
			return nil, errScan
		}
		memberStart := prevEnd
		ke := jsonx.StringEnd(raw, i)
		if ke < 0 {
			return nil, errScan
		}
		key := raw[i:ke]
		i = jsonx.SkipSpace(raw, ke)
		if i >= len(raw) || raw[i] != ':' {
			return nil, errScan
		}
		i = jsonx.SkipSpace(raw, i+1)
		ve := jsonx.ValueEnd(raw, i)
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
		i = jsonx.SkipSpace(raw, ve)
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
