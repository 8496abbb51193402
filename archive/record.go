package archive

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sofadb/sofa/internal/jsonx"
	"github.com/sofadb/sofa/replicate"
)

// A doc chunk is a sequence of records, one per leaf revision, each a JSON
// object followed by "\n":
//
//	{"id":"a","rev":"2-x","deleted":true,"revisions":{"start":2,"ids":["x","y"]},
//	 "atts":[{"name":"f","content_type":"text/plain","digest":"md5-...","length":5,
//	          "encoded_length":7,"encoding":"gzip","revpos":1,"sha256":"<hex>"}],
//	 "body":{...the revision's JSON exactly as the source sent it...}}
//
// "body" is last and embedded raw, so it is stored byte for byte. A body
// may hold newlines as whitespace: read records with a JSON stream decoder
// (jq does), not line by line.
//
// A record whose body carries `_id` and `_rev` (once each, as strings)
// equal to the revision's leaves "id" and "rev" out (the lean form); it then also leaves out "revisions" when the body's
// `_revisions` says the same or, without one, when the history is the rev
// alone, and "deleted" when the body's `_deleted` agrees. A reader takes
// what a record lacks from its body (see decodeRecord).

// recordForm says which fields a record leaves to its body.
type recordForm struct {
	lean        bool // no "id" and "rev"
	omitRevs    bool // no "revisions" (lean only)
	omitDeleted bool // no "deleted" (lean only)
}

// appendRecord appends one record for d in form f; sums are the SHA-256s
// of its attachments' stored bytes, in d.Atts order.
func appendRecord(dst []byte, d *replicate.Doc, body []byte, sums [][32]byte, f recordForm) []byte {
	dst = append(dst, '{')
	sep := false
	if !f.lean {
		dst = append(dst, `"id":`...)
		dst = jsonx.Quote(dst, d.ID)
		dst = append(dst, `,"rev":`...)
		dst = jsonx.Quote(dst, d.Rev)
		sep = true
	}
	if f.lean && !f.omitDeleted {
		dst = append(dst, `"deleted":`...)
		dst = strconv.AppendBool(dst, d.Deleted)
		sep = true
	} else if !f.lean && d.Deleted {
		dst = append(dst, `,"deleted":true`...)
	}
	if len(d.Revisions.IDs) > 0 && !(f.lean && f.omitRevs) {
		if sep {
			dst = append(dst, ',')
		}
		dst = append(dst, `"revisions":{"start":`...)
		dst = strconv.AppendInt(dst, int64(d.Revisions.Start), 10)
		dst = append(dst, `,"ids":[`...)
		for i, id := range d.Revisions.IDs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonx.Quote(dst, id)
		}
		dst = append(dst, "]}"...)
		sep = true
	}
	if len(d.Atts) > 0 {
		if sep {
			dst = append(dst, ',')
		}
		dst = append(dst, `"atts":[`...)
		sep = true
		for i, a := range d.Atts {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"name":`...)
			dst = jsonx.Quote(dst, a.Name)
			dst = append(dst, `,"content_type":`...)
			dst = jsonx.Quote(dst, a.ContentType)
			if a.Digest != "" {
				dst = append(dst, `,"digest":`...)
				dst = jsonx.Quote(dst, a.Digest)
			}
			dst = append(dst, `,"length":`...)
			dst = strconv.AppendInt(dst, a.Length, 10)
			if a.Encoding != "" {
				dst = append(dst, `,"encoding":`...)
				dst = jsonx.Quote(dst, a.Encoding)
				dst = append(dst, `,"encoded_length":`...)
				dst = strconv.AppendInt(dst, int64(len(a.Data)), 10)
			}
			dst = append(dst, `,"revpos":`...)
			dst = strconv.AppendInt(dst, int64(a.RevPos), 10)
			dst = append(dst, `,"sha256":"`...)
			dst = hex.AppendEncode(dst, sums[i][:])
			dst = append(dst, `"}`...)
		}
		dst = append(dst, ']')
	}
	if sep {
		dst = append(dst, ',')
	}
	dst = append(dst, `"body":`...)
	dst = append(dst, body...)
	return append(dst, "}\n"...)
}

// attRef is an attachment as a record names it: metadata plus the SHA-256
// of the blob holding its stored bytes.
type attRef struct {
	att *replicate.Attachment
	sum [32]byte
}

// decodeRecords calls fn for every record of a decompressed doc chunk, in
// order. Each Doc's Body is a slice of chunk (capacity cut at its end, so
// an append copies): chunk must not change while a Doc is in use, and
// stays in memory as long as one of its bodies does. A copy per body cost
// a restore a tenth of its CPU (12 MB of allocations per 10,000 revisions
// of 1 KiB), on a machine whose cores the target's ingest keeps busy.
func decodeRecords(chunk []byte, fn func(d *replicate.Doc, refs []attRef) error) error {
	// From a bytes.Buffer the decoder parses chunk in place, never
	// writing to it (from any other reader it copies, and marks values
	// it has returned as used).
	dec := jsontext.NewDecoder(bytes.NewBuffer(chunk),
		jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	for n := 1; ; n++ {
		if dec.PeekKind() == 0 {
			if _, err := dec.ReadToken(); errors.Is(err, io.EOF) {
				return nil
			}
		}
		d, refs, err := decodeRecord(dec, chunk)
		if err != nil {
			return fmt.Errorf("record %d: %w", n, err)
		}
		if err := fn(d, refs); err != nil {
			return err
		}
	}
}

// decodeRecord decodes the record dec reads next from chunk.
func decodeRecord(dec *jsontext.Decoder, chunk []byte) (*replicate.Doc, []attRef, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, nil, err
	}
	if tok.Kind() != '{' {
		return nil, nil, errors.New("not a JSON object")
	}
	d := &replicate.Doc{}
	var refs []attRef
	var haveID, haveRev, haveBody, haveDeleted, haveRevs bool
	for dec.PeekKind() != '}' {
		kt, err := dec.ReadToken()
		if err != nil {
			return nil, nil, err
		}
		switch key := kt.String(); key {
		case "id", "rev":
			vt, err := dec.ReadToken()
			if err != nil || vt.Kind() != '"' {
				return nil, nil, fmt.Errorf("%s is not a string", key)
			}
			if key == "id" {
				d.ID, haveID = vt.String(), true
			} else {
				d.Rev, haveRev = vt.String(), true
			}
		case "deleted":
			vt, err := dec.ReadToken()
			if err != nil {
				return nil, nil, err
			}
			d.Deleted, haveDeleted = vt.Kind() == 't', true
		case "revisions":
			if err := decodeRevisions(dec, &d.Revisions); err != nil {
				return nil, nil, err
			}
			haveRevs = true
		case "atts":
			if refs, err = decodeAtts(dec); err != nil {
				return nil, nil, err
			}
		case "body":
			v, err := dec.ReadValue()
			if err != nil {
				return nil, nil, fmt.Errorf("body: %w", err)
			}
			if v.Kind() != '{' {
				return nil, nil, errors.New("body is not a JSON object")
			}
			// v is chunk's bytes as they are (ReadValue never rewrites
			// a value), ending where the decoder stands.
			end := dec.InputOffset()
			d.Body, haveBody = chunk[end-int64(len(v)):end:end], true
		default:
			if err := dec.SkipValue(); err != nil {
				return nil, nil, err
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, nil, err
	}
	if !haveID && !haveRev && haveBody {
		if err := fromBody(d, haveDeleted, haveRevs); err != nil {
			return nil, nil, err
		}
	} else if !haveID || !haveRev || !haveBody || d.ID == "" || d.Rev == "" {
		return nil, nil, errors.New("record lacks id, rev or body")
	}
	if err := revisionsAgree(d.Rev, d.Revisions); err != nil {
		return nil, nil, err
	}
	for _, r := range refs {
		d.Atts = append(d.Atts, r.att)
	}
	return d, refs, nil
}

// revisionsAgree checks that a known history (start and ids, newest
// first) ends in a well-formed rev N-hash: start N, first id hash. (A
// malformed rev, as a source sent it, is kept with its history as is.)
func revisionsAgree(rev string, r replicate.Revisions) error {
	gen, hash, ok := strings.Cut(rev, "-")
	n, err := strconv.Atoi(gen)
	if len(r.IDs) == 0 || !ok || err != nil || n <= 0 || hash == "" {
		return nil
	}
	if n != r.Start || hash != r.IDs[0] {
		return fmt.Errorf("revisions (start %d, first id %q) do not end in rev %q", r.Start, shorten(r.IDs[0]), rev)
	}
	return nil
}

// fromBody completes a lean record (no "id" and "rev") from its body: id
// and rev always, deleted and revisions unless the record has them. A
// revisions the body lacks too is the rev alone.
func fromBody(d *replicate.Doc, haveDeleted, haveRevs bool) error {
	env, ok := validEnvelope(d.Body) // the record's decoder read the body: valid
	if !ok {
		var err error
		if env, err = scanEnvelope(d.Body); err != nil {
			return fmt.Errorf("body: %w", err)
		}
	}
	if !env.hasID || !env.hasRev || env.id == "" || env.rev == "" {
		return errors.New("record lacks id and rev, and its body has no unambiguous _id and _rev")
	}
	d.ID, d.Rev = env.id, env.rev
	if !haveDeleted {
		d.Deleted = env.deleted
	}
	if !haveRevs {
		if env.hasRevs {
			d.Revisions = env.revisions
		} else if d.Revisions = revOnly(d.Rev); len(d.Revisions.IDs) == 0 {
			return fmt.Errorf("rev %q is malformed", d.Rev)
		}
	}
	return nil
}

func decodeRevisions(dec *jsontext.Decoder, r *replicate.Revisions) error {
	if err := replicate.DecodeRevisions(dec, r); err != nil {
		return fmt.Errorf("revisions: %w", err)
	}
	return nil
}

func decodeAtts(dec *jsontext.Decoder) ([]attRef, error) {
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
		return nil, errors.New("atts is not an array")
	}
	var refs []attRef
	for dec.PeekKind() != ']' {
		if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
			return nil, errors.New("attachment is not an object")
		}
		a := &replicate.Attachment{}
		var sum [32]byte
		haveSum := false
		for dec.PeekKind() != '}' {
			kt, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			field := kt.String()
			vt, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			if k := vt.Kind(); k == '{' || k == '[' {
				return nil, fmt.Errorf("attachment field %s is not a scalar", field)
			}
			switch field {
			case "name":
				a.Name = vt.String()
			case "content_type":
				a.ContentType = vt.String()
			case "digest":
				a.Digest = vt.String()
			case "length":
				a.Length, _ = jsonx.Int(vt)
			case "encoded_length":
				a.EncodedLength, _ = jsonx.Int(vt)
			case "encoding":
				a.Encoding = vt.String()
			case "revpos":
				n, _ := jsonx.Int(vt)
				a.RevPos = int(n)
			case "sha256":
				s := vt.String()
				if len(s) != 64 {
					return nil, fmt.Errorf("attachment %q: bad sha256", a.Name)
				}
				if _, err := hex.Decode(sum[:], []byte(s)); err != nil {
					return nil, fmt.Errorf("attachment %q: bad sha256", a.Name)
				}
				haveSum = true
			}
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		if !haveSum {
			return nil, fmt.Errorf("attachment %q has no sha256", a.Name)
		}
		refs = append(refs, attRef{att: a, sum: sum})
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	return refs, nil
}
