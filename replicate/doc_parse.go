package replicate

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sofadb/sofa/internal/jsonx"
)

// ParseDoc reads one revision's JSON object (as found in a `_bulk_get` or
// `open_revs` answer or an archive). It parses only the envelope: `_id`,
// `_rev`, `_deleted`, `_revisions` and `_attachments`; the rest stays raw.
// Each envelope name may appear once at the top level; other names may
// repeat (the body is carried as it is). Inline attachment `data` (base64)
// is decoded into Attachment.Data. The returned Doc does not alias raw.
func ParseDoc(raw []byte) (*Doc, error) {
	raw = bytes.TrimSpace(raw)
	pd := getDecoder(raw, bodyOpts...)
	_, err := pd.dec.ReadValue()
	if err == nil {
		if _, err = pd.dec.ReadToken(); err != io.EOF {
			err = fmt.Errorf("data after the object")
		} else {
			err = nil
		}
	}
	putDecoder(pd)
	if err != nil {
		return nil, fmt.Errorf("parse doc: %w", err)
	}
	return scanDoc(raw)
}

// ParseDocValid is ParseDoc for raw known to be one valid JSON value, as
// jsontext.Decoder.ReadValue returns it (a `_bulk_get` answer's revision,
// a changes row's doc): raw is walked once, not checked again. Given
// anything else it returns an error or a wrong Doc, but never panics.
func ParseDocValid(raw []byte) (*Doc, error) {
	return scanDoc(bytes.TrimSpace(raw))
}

// spliceOut returns raw without the object member spanning [start, end),
// removing one adjacent comma so the object stays valid.
func spliceOut(raw []byte, start, end int) []byte {
	// InputOffset before a member points just after the previous value
	// (before any comma); find the member's real start.
	s := start
	for s < end && (raw[s] == ' ' || raw[s] == '\t' || raw[s] == '\n' || raw[s] == '\r' || raw[s] == ',') {
		if raw[s] == ',' {
			// leading comma belongs to this member: cut it too.
			out := make([]byte, 0, len(raw)-(end-start))
			out = append(out, raw[:start]...)
			return append(out, raw[end:]...)
		}
		s++
	}
	// first member: cut the trailing comma (and the space before it)
	// instead; with no comma it is the only member and the space before
	// the closing brace stays.
	e := end
	for e < len(raw) && (raw[e] == ' ' || raw[e] == '\t' || raw[e] == '\n' || raw[e] == '\r') {
		e++
	}
	if e < len(raw) && raw[e] == ',' {
		e++
	} else {
		e = end
	}
	out := make([]byte, 0, len(raw)-(e-start))
	out = append(out, raw[:start]...)
	return append(out, raw[e:]...)
}

func parseRevisions(v []byte, r *Revisions) error {
	if err := ParseRevisions(v, r); err != nil {
		return fmt.Errorf("parse doc: _revisions: %w", err)
	}
	return nil
}

// ParseRevisions decodes the `_revisions` object v, one valid JSON value
// (as a jsontext.Decoder returned it), into r (reset first), as
// DecodeRevisions does into a zero r.
// The shape CouchDB writes, {"start":N,"ids":[...]} with ids of plain
// ASCII, is walked directly (plainRevisions); any other goes through the
// decoder.
func ParseRevisions(v []byte, r *Revisions) error {
	*r = Revisions{}
	if plainRevisions(v, r) {
		return nil
	}
	*r = Revisions{}
	pd := getDecoder(v)
	defer putDecoder(pd)
	return DecodeRevisions(&pd.dec, r)
}

// plainRevisions decodes v when it is exactly {"start":N,"ids":[...]}
// (either order, N a plain non-negative integer, each id plain: see
// jsonx.Plain); false for anything else, r then partly set.
func plainRevisions(v []byte, r *Revisions) bool {
	if len(v) < 2 || v[0] != '{' {
		return false
	}
	var haveStart, haveIDs bool
	i := jsonx.SkipSpace(v, 1)
	for first := true; i < len(v) && v[i] != '}'; first = false {
		if !first {
			if v[i] != ',' {
				return false
			}
			i = jsonx.SkipSpace(v, i+1)
		}
		end := jsonx.StringEnd(v, i)
		if i >= len(v) || v[i] != '"' || end < 0 {
			return false
		}
		name := v[i+1 : end-1]
		if i = jsonx.SkipSpace(v, end); i >= len(v) || v[i] != ':' {
			return false
		}
		i = jsonx.SkipSpace(v, i+1)
		switch {
		case string(name) == "start" && !haveStart:
			n, j := 0, i
			for ; j < len(v) && v[j] >= '0' && v[j] <= '9' && j-i < 9; j++ {
				n = n*10 + int(v[j]-'0')
			}
			if j == i || j < len(v) && (v[j] >= '0' && v[j] <= '9' || v[j] == '.' || v[j] == 'e' || v[j] == 'E') {
				return false
			}
			r.Start, haveStart, i = n, true, j
		case string(name) == "ids" && !haveIDs && i < len(v) && v[i] == '[':
			i = jsonx.SkipSpace(v, i+1)
			for first := true; i < len(v) && v[i] != ']'; first = false {
				if !first {
					if v[i] != ',' {
						return false
					}
					i = jsonx.SkipSpace(v, i+1)
				}
				end := jsonx.StringEnd(v, i)
				if i >= len(v) || v[i] != '"' || end < 0 || !jsonx.Plain(v[i+1:end-1]) {
					return false
				}
				r.IDs = append(r.IDs, string(v[i+1:end-1]))
				i = jsonx.SkipSpace(v, end)
			}
			haveIDs, i = true, i+1
		default:
			return false
		}
		i = jsonx.SkipSpace(v, i)
	}
	return haveStart && haveIDs && i < len(v)
}

// DecodeRevisions reads a `_revisions` object {"start":N,"ids":[...]}
// from dec (positioned before it) into r; unknown members are skipped.
func DecodeRevisions(dec *jsontext.Decoder, r *Revisions) error {
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return fmt.Errorf("not an object")
	}
	for dec.PeekKind() != '}' {
		kt, err := dec.ReadToken()
		if err != nil {
			return err
		}
		switch kt.String() {
		case "start":
			vt, err := dec.ReadToken()
			n, ok := jsonx.Int(vt)
			if err != nil || !ok {
				return fmt.Errorf("start is not an integer")
			}
			r.Start = int(n)
		case "ids":
			if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
				return fmt.Errorf("ids is not an array")
			}
			for dec.PeekKind() != ']' {
				vt, err := dec.ReadToken()
				if err != nil || vt.Kind() != '"' {
					return fmt.Errorf("ids holds a non-string")
				}
				r.IDs = append(r.IDs, vt.String())
			}
			if _, err := dec.ReadToken(); err != nil {
				return err
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return err
			}
		}
	}
	_, err := dec.ReadToken()
	return err
}

func parseAttachments(v []byte) ([]*Attachment, error) {
	pd := getDecoder(v)
	defer putDecoder(pd)
	dec := &pd.dec
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, fmt.Errorf("parse doc: _attachments is not an object")
	}
	var atts []*Attachment
	for dec.PeekKind() != '}' {
		kt, err := dec.ReadToken()
		if err != nil {
			return nil, fmt.Errorf("parse doc: _attachments: %w", err)
		}
		a := &Attachment{Name: kt.String()}
		if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
			return nil, fmt.Errorf("parse doc: attachment %q is not an object", a.Name)
		}
		var data string
		hasData := false
		for dec.PeekKind() != '}' {
			ft, err := dec.ReadToken()
			if err != nil {
				return nil, fmt.Errorf("parse doc: attachment %q: %w", a.Name, err)
			}
			field := ft.String()
			v, err := dec.ReadValue()
			if err != nil {
				return nil, fmt.Errorf("parse doc: attachment %q: %s: %w", a.Name, field, err)
			}
			var ok bool
			switch field {
			case "content_type":
				a.ContentType, ok = valueString(v)
			case "digest":
				a.Digest, ok = valueString(v)
			case "length":
				a.Length, ok = valueInt(v)
			case "encoded_length":
				a.EncodedLength, ok = valueInt(v)
			case "encoding":
				a.Encoding, ok = valueString(v)
			case "revpos":
				var n int64
				n, ok = valueInt(v)
				a.RevPos = int(n)
			case "data":
				data, ok = valueString(v)
				hasData = ok
			default:
				// "stub" and "follows" only say whether the bytes came
				// with this answer; other members are ignored.
				ok = true
			}
			if !ok && v.Kind() != 'n' {
				return nil, fmt.Errorf("parse doc: attachment %q: bad %s", a.Name, field)
			}
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, fmt.Errorf("parse doc: attachment %q: %w", a.Name, err)
		}
		if hasData {
			b, err := base64.StdEncoding.DecodeString(data)
			if err != nil {
				return nil, fmt.Errorf("parse doc: attachment %q: bad base64: %w", a.Name, err)
			}
			a.Data = b
			if a.Length == 0 && a.Encoding == "" {
				a.Length = int64(len(b))
			}
		}
		atts = append(atts, a)
	}
	return atts, nil
}
