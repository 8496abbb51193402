package couch

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"strconv"
	"strings"

	"github.com/sofadb/sofa/replicate"
)

// RelatedBody is one revision encoded as a multipart/related body for
// `PUT /db/{id}?new_edits=false` (CouchDB's replicator write for documents
// with attachments): part 1 is the JSON from doc.AppendJSON(nil,
// replicate.Follows), then one part per attachment that has Data and is not
// a stub, in the order of doc.Atts (the order of the `follows` entries),
// bytes exactly as stored (Content-Encoding names a gzip encoding). It
// holds the JSON once and shares the attachment bytes with doc, so it can be
// sent any number of times (retries) without copying them; doc must not
// change meanwhile.
type RelatedBody struct {
	chunks   [][]byte                      // the body, in order; attachment chunks alias doc
	streams  map[int]*replicate.Attachment // chunk index -> attachment piped at send time (see StreamReader)
	length   int64
	boundary string
}

// boundaryLen is the length of every boundary NewRelatedBody chooses.
const boundaryLen = 32

// NewRelatedBody encodes doc with a fresh random boundary.
func NewRelatedBody(doc *replicate.Doc) *RelatedBody {
	var r [boundaryLen / 2]byte
	rand.Read(r[:]) // never fails (crypto/rand since Go 1.24)
	return newRelatedBody(doc, hex.EncodeToString(r[:]))
}

func newRelatedBody(doc *replicate.Doc, boundary string) *RelatedBody {
	b := &RelatedBody{boundary: boundary}
	head := make([]byte, 0, 128)
	head = append(head, "--"...)
	head = append(head, boundary...)
	head = append(head, "\r\nContent-Type: application/json\r\n\r\n"...)
	b.add(head)
	b.add(doc.AppendJSON(nil, replicate.Follows))
	for _, a := range doc.Atts {
		if a.Stub || a.Data == nil && !a.Stream {
			continue
		}
		size := int64(len(a.Data))
		if a.Stream {
			size = a.StoredLength()
		}
		h := make([]byte, 0, 160+len(a.Name)+len(a.ContentType))
		h = append(h, "\r\n--"...)
		h = append(h, boundary...)
		h = append(h, "\r\nContent-Disposition: attachment; filename=\""...)
		h = appendFilename(h, a.Name)
		h = append(h, "\"\r\nContent-Type: "...)
		if a.ContentType == "" {
			h = append(h, "application/octet-stream"...)
		} else {
			h = appendHeaderText(h, a.ContentType)
		}
		h = append(h, "\r\nContent-Length: "...)
		h = strconv.AppendInt(h, size, 10)
		if a.Encoding != "" {
			h = append(h, "\r\nContent-Encoding: "...)
			h = appendHeaderText(h, a.Encoding)
		}
		h = append(h, "\r\n\r\n"...)
		b.add(h)
		if a.Stream {
			b.addStream(a)
		} else {
			b.add(a.Data)
		}
	}
	tail := make([]byte, 0, boundaryLen+8)
	tail = append(tail, "\r\n--"...)
	tail = append(tail, boundary...)
	tail = append(tail, "--"...)
	b.add(tail)
	return b
}

func (b *RelatedBody) addStream(a *replicate.Attachment) {
	if b.streams == nil {
		b.streams = map[int]*replicate.Attachment{}
	}
	b.streams[len(b.chunks)] = a
	b.chunks = append(b.chunks, nil)
	b.length += a.StoredLength()
}

func (b *RelatedBody) add(p []byte) {
	b.chunks = append(b.chunks, p)
	b.length += int64(len(p))
}

// appendHeaderText appends s for use inside a part header (a content
// type, an encoding): control characters (CR, LF, ...) would end the
// header early and are percent-encoded.
func appendHeaderText(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f {
			dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
			continue
		}
		dst = append(dst, c)
	}
	return dst
}

// appendFilename appends an attachment name for use between the quotes
// of a part's `filename="..."`. CouchDB matches parts to `follows`
// entries by order and ignores the filename; PouchDB Server matches them
// by filename, as its multipart parser (multiparty) gives it: the quoted
// text with `%22` and `\"` made `"`, then every `&#N;` made the character
// of code N, then cut after its last backslash. So `"` goes as `%22`, and
// `%`, `&`, control characters as `&#N;`: what multiparty decodes is
// the name again, byte for byte, for any name without a backslash (see
// filenameCarried).
func appendFilename(dst []byte, name string) []byte {
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '"':
			dst = append(dst, "%22"...)
		case c == '%' || c == '&' || c == '\\' || c < 0x20 || c == 0x7f:
			dst = append(dst, "&#"...)
			dst = strconv.AppendInt(dst, int64(c), 10)
			dst = append(dst, ';')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// filenameCarried says whether PouchDB Server can match a part named
// name to its attachment (see appendFilename): not when the name holds a
// backslash, which its parser takes for the end of a Windows path.
func filenameCarried(name string) bool { return !strings.ContainsRune(name, '\\') }

// ContentType is the request's Content-Type header value.
func (b *RelatedBody) ContentType() string {
	return `multipart/related; boundary="` + b.boundary + `"`
}

// Len is the exact body length in bytes, for Content-Length.
func (b *RelatedBody) Len() int64 { return b.length }

// Reader returns a new reader over the whole body (suitable for
// http.Request.Body and GetBody); readers share, never copy, the bytes.
func (b *RelatedBody) Reader() io.Reader {
	rs := make([]io.Reader, len(b.chunks))
	for i, c := range b.chunks {
		rs[i] = bytes.NewReader(c)
	}
	return io.MultiReader(rs...)
}

// WriteTo writes the whole body to w.
func (b *RelatedBody) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, c := range b.chunks {
		m, err := w.Write(c)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// WriteRelated writes doc to w as a multipart/related body (see
// RelatedBody) and returns the Content-Type to send with it. Its length is
// RelatedLength(doc).
func WriteRelated(w io.Writer, doc *replicate.Doc) (contentType string, err error) {
	b := NewRelatedBody(doc)
	if _, err := b.WriteTo(w); err != nil {
		return "", err
	}
	return b.ContentType(), nil
}

// RelatedLength is the exact length in bytes of the body WriteRelated
// writes for doc (every boundary it picks has the same length).
func RelatedLength(doc *replicate.Doc) int64 {
	var zero [boundaryLen]byte
	for i := range zero {
		zero[i] = 'x'
	}
	return newRelatedBody(doc, string(zero[:])).Len()
}
