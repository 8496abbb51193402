package replicate

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sofadb/sofa/internal/jsonx"
)

// Attachment is one entry of a revision's `_attachments`, kept in the
// encoding the source stores it in: Data are the stored bytes (gzip when
// Encoding is "gzip"), whose md5 is Digest.
type Attachment struct {
	Name          string // attachment name (may not start with "_")
	ContentType   string // content_type
	Digest        string // "md5-<base64>" of the stored bytes, as the source reports it
	Length        int64  // length: identity size in bytes
	EncodedLength int64  // encoded_length: stored size when Encoding != ""
	Encoding      string // "" (identity) or "gzip"
	RevPos        int    // revpos: generation that introduced this content
	// Stub is true when the bytes do not travel: the target already holds
	// them (an ancestor has the same revpos). A stub is written as
	// {"stub":true}.
	Stub bool
	// Data holds the stored bytes once read; nil until fetched.
	Data []byte
	// Stream: the bytes are not held but piped from the source into the
	// target's multipart/related PUT when the revision is written (large
	// attachments); Data stays nil, StoredLength says how many bytes.
	Stream bool
}

// StoredLength is the number of bytes the attachment occupies as stored.
func (a *Attachment) StoredLength() int64 {
	if a.Encoding != "" && a.EncodedLength > 0 {
		return a.EncodedLength
	}
	return a.Length
}

// Revisions is a document's `_revisions`: Start is the generation of IDs[0],
// IDs the revision hashes newest first.
type Revisions struct {
	Start int      `json:"start"`
	IDs   []string `json:"ids"`
}

// Doc is one revision of one document. Body is the revision's JSON object
// exactly as the source sent it (`_id`, `_rev`, `_revisions`, `_deleted` and
// all user fields, byte for byte) with only the `_attachments` member cut
// out; attachments live in Atts, in the source's order.
type Doc struct {
	ID        string
	Rev       string
	Deleted   bool
	Revisions Revisions
	Body      []byte
	Atts      []*Attachment
}

// Size is the number of bytes the revision holds in memory: body plus the
// attachment bytes read so far.
func (d *Doc) Size() int64 {
	n := int64(len(d.Body)) + 64
	for _, a := range d.Atts {
		n += int64(len(a.Data)) + 64
	}
	return n
}

// NeedsAttachments reports whether an attachment is neither a stub, nor
// piped, nor read yet. A zero-length attachment needs reading too: its
// bytes (none, or a gzip frame on CouchDB) must travel, since a stub names
// content the target lacks.
func (d *Doc) NeedsAttachments() bool {
	for _, a := range d.Atts {
		if !a.Stub && !a.Stream && a.Data == nil {
			return true
		}
	}
	return false
}

// PendingBytes is the number of attachment bytes still to be read: the
// stored length of every attachment that is neither a stub nor read.
func (d *Doc) PendingBytes() int64 {
	var n int64
	for _, a := range d.Atts {
		if !a.Stub && !a.Stream && a.Data == nil {
			n += a.StoredLength()
		}
	}
	return n
}

// Generation returns N of an "N-hash" revision, or 0 if malformed.
func Generation(rev string) int {
	i := bytes.IndexByte([]byte(rev), '-')
	if i <= 0 {
		return 0
	}
	n, err := strconv.Atoi(rev[:i])
	if err != nil {
		return 0
	}
	return n
}

// ParseDoc reads one revision's JSON object (as found in a `_bulk_get` or
// `open_revs` answer or an archive). It parses only the envelope: `_id`,
// `_rev`, `_deleted`, `_revisions` and `_attachments`; the rest stays raw.
// Inline attachment `data` (base64) is decoded into Attachment.Data. The
// returned Doc does not alias raw.
func ParseDoc(raw []byte) (*Doc, error) {
	raw = bytes.TrimSpace(raw)
	pd := getDecoder(raw)
	defer putDecoder(pd)
	dec := &pd.dec
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, fmt.Errorf("parse doc: %w", err)
	}
	if tok.Kind() != '{' {
		return nil, fmt.Errorf("parse doc: not a JSON object")
	}
	d := &Doc{}
	attStart, attEnd := int64(-1), int64(-1)
	for dec.PeekKind() != '}' {
		memberStart := dec.InputOffset()
		kt, err := dec.ReadToken()
		if err != nil {
			return nil, fmt.Errorf("parse doc: %w", err)
		}
		key := kt.String()
		switch key {
		case "_id", "_rev":
			vt, err := dec.ReadToken()
			if err != nil {
				return nil, fmt.Errorf("parse doc: %s: %w", key, err)
			}
			if vt.Kind() != '"' {
				return nil, fmt.Errorf("parse doc: %s is not a string", key)
			}
			if key == "_id" {
				d.ID = vt.String()
			} else {
				d.Rev = vt.String()
			}
		case "_deleted":
			v, err := dec.ReadValue()
			if err != nil {
				return nil, fmt.Errorf("parse doc: _deleted: %w", err)
			}
			d.Deleted = string(v) == "true"
		case "_revisions":
			v, err := dec.ReadValue()
			if err != nil {
				return nil, fmt.Errorf("parse doc: _revisions: %w", err)
			}
			if err := parseRevisions(v, &d.Revisions); err != nil {
				return nil, err
			}
		case "_attachments":
			v, err := dec.ReadValue()
			if err != nil {
				return nil, fmt.Errorf("parse doc: _attachments: %w", err)
			}
			atts, err := parseAttachments(v)
			if err != nil {
				return nil, err
			}
			d.Atts = atts
			attStart, attEnd = memberStart, dec.InputOffset()
		default:
			if err := dec.SkipValue(); err != nil {
				return nil, fmt.Errorf("parse doc: %s: %w", key, err)
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, fmt.Errorf("parse doc: %w", err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, fmt.Errorf("parse doc: data after the object")
	}
	if d.ID == "" {
		return nil, fmt.Errorf("parse doc: no _id")
	}
	if attStart < 0 {
		d.Body = append([]byte(nil), raw...)
	} else {
		d.Body = spliceOut(raw, int(attStart), int(attEnd))
	}
	if len(d.Revisions.IDs) == 0 && d.Rev != "" {
		if g := Generation(d.Rev); g > 0 {
			d.Revisions = Revisions{Start: g, IDs: []string{d.Rev[bytes.IndexByte([]byte(d.Rev), '-')+1:]}}
		}
	}
	return d, nil
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
	pd := getDecoder(v)
	defer putDecoder(pd)
	if err := DecodeRevisions(&pd.dec, r); err != nil {
		return fmt.Errorf("parse doc: _revisions: %w", err)
	}
	return nil
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

// AttachmentMode says how AppendJSON writes attachments that carry Data.
type AttachmentMode int

const (
	// Inline writes Data as base64 `data` (only for identity-encoded bytes).
	Inline AttachmentMode = iota
	// Follows writes `"follows":true` for a multipart/related body whose
	// parts carry the bytes in the same order.
	Follows
)

// AppendJSON appends the revision as a JSON object ready for `_bulk_docs`
// or a PUT with new_edits=false: Body with `_attachments` put back. Stubs
// (and attachments without Data) are written as stubs.
func (d *Doc) AppendJSON(dst []byte, mode AttachmentMode) []byte {
	if len(d.Atts) == 0 {
		return append(dst, d.Body...)
	}
	body := bytes.TrimRight(d.Body, " \t\r\n")
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		body = []byte("{}") // no body (a Doc built by hand)
	}
	// Insert after the last member, before the space that precedes the
	// closing brace, so that ParseDoc of the result gives Body back.
	end := len(bytes.TrimRight(body[:len(body)-1], " \t\r\n"))
	dst = append(dst, body[:end]...)
	if end > 1 { // not an empty object: a member precedes
		dst = append(dst, ',')
	}
	dst = append(dst, `"_attachments":{`...)
	for i, a := range d.Atts {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonx.Quote(dst, a.Name)
		dst = append(dst, `:{"content_type":`...)
		dst = jsonx.Quote(dst, a.ContentType)
		dst = append(dst, `,"revpos":`...)
		dst = strconv.AppendInt(dst, int64(a.RevPos), 10)
		switch {
		case a.Stub || a.Data == nil && !(a.Stream && mode == Follows):
			if a.Digest != "" {
				dst = append(dst, `,"digest":`...)
				dst = jsonx.Quote(dst, a.Digest)
			}
			// CouchDB takes a stub's metadata from the ancestor; PouchDB
			// Server keeps what the stub says, so it says everything.
			if a.Length > 0 {
				dst = append(dst, `,"length":`...)
				dst = strconv.AppendInt(dst, a.Length, 10)
			}
			if a.Encoding != "" {
				dst = append(dst, `,"encoding":`...)
				dst = jsonx.Quote(dst, a.Encoding)
				if a.EncodedLength > 0 {
					dst = append(dst, `,"encoded_length":`...)
					dst = strconv.AppendInt(dst, a.EncodedLength, 10)
				}
			}
			dst = append(dst, `,"stub":true`...)
		case mode == Inline:
			dst = append(dst, `,"data":"`...)
			dst = base64.StdEncoding.AppendEncode(dst, a.Data)
			dst = append(dst, '"')
		default:
			dst = append(dst, `,"follows":true`...)
			if a.Digest != "" {
				dst = append(dst, `,"digest":`...)
				dst = jsonx.Quote(dst, a.Digest)
			}
			dst = append(dst, `,"length":`...)
			dst = strconv.AppendInt(dst, a.Length, 10)
			if a.Encoding != "" {
				n := int64(len(a.Data))
				if a.Stream {
					n = a.StoredLength()
				}
				dst = append(dst, `,"encoding":`...)
				dst = jsonx.Quote(dst, a.Encoding)
				dst = append(dst, `,"encoded_length":`...)
				dst = strconv.AppendInt(dst, n, 10)
			}
		}
		dst = append(dst, '}')
	}
	dst = append(dst, '}')
	return append(dst, body[end:]...)
}

func unquote(s []byte) string { return jsonx.Unquote(s) }

// pooledDecoder is a decoder over an in-memory JSON value, reused across
// ParseDoc calls: a jsontext.Decoder reading a bytes.Buffer parses the
// bytes in place, and reuse saves its allocation.
type pooledDecoder struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

var decoders = sync.Pool{New: func() any { return new(pooledDecoder) }}

// docOpts: bodies are raw bytes carried as they are, so strings may hold
// invalid UTF-8 or escaped lone surrogates ("\ud800", which PouchDB Server
// accepts); a target that refuses them reports that one revision.
var docOpts = []jsontext.Options{jsontext.AllowInvalidUTF8(true)}

func getDecoder(b []byte) *pooledDecoder {
	pd := decoders.Get().(*pooledDecoder)
	pd.buf = *bytes.NewBuffer(b)
	pd.dec.Reset(&pd.buf, docOpts...)
	return pd
}

// putDecoder returns pd to the pool, dropping its reference to the input.
func putDecoder(pd *pooledDecoder) {
	pd.buf = bytes.Buffer{}
	pd.dec.Reset(&pd.buf)
	decoders.Put(pd)
}

// valueString returns the content of a JSON string value.
func valueString(v jsontext.Value) (string, bool) {
	if v.Kind() != '"' {
		return "", false
	}
	return jsonx.Unquote(v), true
}

// valueInt returns the value of a JSON integer; a number that is not an
// int64 (1.5, 1e30) gives 0 and ok, anything else not ok.
func valueInt(v jsontext.Value) (int64, bool) {
	if v.Kind() != '0' {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, true
	}
	return n, true
}
