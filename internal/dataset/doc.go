// Package dataset builds databases of real public data and of synthetic,
// deterministic data, and writes them into a CouchDB-compatible server over
// plain HTTP, for demos, tests and benchmarks.
//
// Every document is produced as one complete revision for `_bulk_docs` with
// `new_edits=false`: it carries `_id`, a deterministic `_rev` and
// `_revisions`, and, when it has attachments, inline base64 `_attachments`.
// Loading the same set twice therefore yields byte-identical databases with
// the same revision ids, so runs can be compared.
//
// Real data comes from npm packages installed under a node_modules directory
// (see [Countries], [Cities], [Emoji]); synthetic data from [Synth].
//
// This package deliberately does not depend on sofa's own CouchDB client:
// it is the independent writer that tests and benchmarks measure against.
package dataset

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
)

// DB is one database to create and fill.
type DB struct {
	// Name is the database name, valid for CouchDB (lower case, starts with
	// a letter).
	Name string
	// Revs is the number of revisions Each yields (documents written with
	// new_edits=false; a document with conflicts counts once per leaf).
	Revs int
	// Each calls yield once per revision, in a deterministic order. Each
	// stops and returns yield's error if yield fails; otherwise it returns
	// the first error met reading the data (for example a missing file).
	Each func(yield func(rev []byte) error) error
}

// att is one inline attachment of a revision.
type att struct {
	Name        string
	ContentType string
	Data        []byte
}

// revision is a revision being assembled: its envelope plus a user body.
type revision struct {
	ID      string
	Gen     int      // generation of the revision (>= 1)
	Hashes  []string // revision hashes, newest first; len(Hashes) <= Gen
	Deleted bool
	Body    []byte // a JSON object without underscore members; nil for {}
	Atts    []att
}

// encode returns the revision as one JSON object for _bulk_docs with
// new_edits=false. Body must be a JSON object.
func (r *revision) encode() ([]byte, error) {
	if len(r.Hashes) == 0 || r.Gen < len(r.Hashes) {
		return nil, fmt.Errorf("dataset: revision %q: bad history (gen %d, %d hashes)", r.ID, r.Gen, len(r.Hashes))
	}
	buf := make([]byte, 0, 128+len(r.Body)+attsLen(r.Atts))
	buf = append(buf, `{"_id":`...)
	buf = appendString(buf, r.ID)
	buf = append(buf, `,"_rev":"`...)
	buf = strconv.AppendInt(buf, int64(r.Gen), 10)
	buf = append(buf, '-')
	buf = append(buf, r.Hashes[0]...)
	buf = append(buf, `","_revisions":{"start":`...)
	buf = strconv.AppendInt(buf, int64(r.Gen), 10)
	buf = append(buf, `,"ids":[`...)
	for i, h := range r.Hashes {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, '"')
		buf = append(buf, h...)
		buf = append(buf, '"')
	}
	buf = append(buf, "]}"...)
	if r.Deleted {
		buf = append(buf, `,"_deleted":true`...)
	}
	if len(r.Atts) > 0 {
		buf = append(buf, `,"_attachments":{`...)
		for i, a := range r.Atts {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendString(buf, a.Name)
			buf = append(buf, `:{"content_type":`...)
			buf = appendString(buf, a.ContentType)
			buf = append(buf, `,"data":"`...)
			buf = base64.StdEncoding.AppendEncode(buf, a.Data)
			buf = append(buf, `"}`...)
		}
		buf = append(buf, '}')
	}
	body := trimSpace(r.Body)
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		if body != nil {
			return nil, fmt.Errorf("dataset: revision %q: body is not a JSON object", r.ID)
		}
		body = []byte("{}")
	}
	inner := trimSpace(body[1 : len(body)-1])
	if len(inner) > 0 {
		buf = append(buf, ',')
		buf = append(buf, inner...)
	}
	buf = append(buf, '}')
	return buf, nil
}

func attsLen(atts []att) int {
	n := 0
	for _, a := range atts {
		n += base64.StdEncoding.EncodedLen(len(a.Data)) + 64
	}
	return n
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	b, err := json.Marshal(s)
	if err != nil { // cannot happen for a string
		panic(err)
	}
	return append(dst, b...)
}

// revHash returns a deterministic 32-hex revision hash of the given parts.
func revHash(parts ...[]byte) string {
	h := md5.New()
	for _, p := range parts {
		var n [8]byte
		l := len(p)
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// contentHash hashes a revision's user content: body and attachments.
func contentHash(id string, body []byte, atts []att) string {
	parts := [][]byte{[]byte(id), body}
	for _, a := range atts {
		parts = append(parts, []byte(a.Name), []byte(a.ContentType), a.Data)
	}
	return revHash(parts...)
}

// single returns a first-generation revision whose hash derives from its
// content.
func single(id string, body []byte, atts []att) ([]byte, error) {
	r := revision{ID: id, Gen: 1, Hashes: []string{contentHash(id, body, atts)}, Body: body, Atts: atts}
	return r.encode()
}
