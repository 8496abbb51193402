package replicate

import (
	"bytes"
	"strconv"
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
	// them (the ancestor it fills the stub from has the same revpos, and
	// the same digest where it fills stubs by name, see asStub). A stub
	// is written as {"stub":true}.
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

// sentSize is what writing the revision sends of it: Size without the
// bytes of attachments sent as stubs (held for a missing_stub rewrite).
func (d *Doc) sentSize() int64 {
	n := d.Size()
	for _, a := range d.Atts {
		if a.Stub {
			n -= int64(len(a.Data))
		}
	}
	return n
}

// inheritsBytes: d carries the bytes of an attachment an ancestor
// introduced (revpos above 0, below its generation).
func inheritsBytes(d *Doc) bool {
	for _, a := range d.Atts {
		if a.Data != nil && a.RevPos > 0 && a.RevPos < d.Revisions.Start {
			return true
		}
	}
	return false
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
