package replicate

import (
	"bytes"
	"encoding/base64"
	"strconv"

	"github.com/sofadb/sofa/internal/jsonx"
)

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
