package archive

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sofadb/sofa/replicate"
)

// envelope is what a revision's body says about itself: its top-level
// `_id`, `_rev`, `_deleted` and `_revisions` members. A record whose body
// carries its id and rev leaves them out (see appendRecord), and a reader
// takes them from here.
type envelope struct {
	id, rev   string
	hasID     bool // `_id` present once, a string
	hasRev    bool // `_rev` present once, a string
	deleted   bool // `_deleted` is true
	revisions replicate.Revisions
	hasRevs   bool // `_revisions` present once and decoded
	ambiguous bool // one of the four names appears twice, or has another type
}

// envDecoders pools decoders for scanEnvelope. A decoder reading a
// bytes.Buffer parses the buffer's bytes in place, without copying them.
var envDecoders = sync.Pool{New: func() any { return new(envDecoder) }}

type envDecoder struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

var envOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

var errNotObject = errors.New("body is not one JSON object")

// scanEnvelope checks that body is exactly one JSON object (duplicate
// names and invalid UTF-8 allowed, as the source sent them) and returns
// its envelope. The error is errNotObject for anything else; a `_revisions`
// member that is not a revisions object is an error too (callers that
// only validate fall back to jsontext.Value.IsValid).
func scanEnvelope(body []byte) (envelope, error) {
	var env envelope
	ed := envDecoders.Get().(*envDecoder)
	defer func() {
		ed.buf = bytes.Buffer{}
		ed.dec.Reset(&ed.buf, envOptions...)
		envDecoders.Put(ed)
	}()
	ed.buf = *bytes.NewBuffer(body)
	ed.dec.Reset(&ed.buf, envOptions...)
	dec := &ed.dec
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return env, errNotObject
	}
	seen := 0 // bits: _id, _rev, _deleted, _revisions
	for dec.PeekKind() != '}' {
		kt, err := dec.ReadToken()
		if err != nil {
			return env, errNotObject
		}
		name := kt.String()
		bit := envelopeBit(name)
		if bit == 0 {
			if err := dec.SkipValue(); err != nil {
				return env, errNotObject
			}
			continue
		}
		if seen&bit != 0 {
			env.ambiguous = true
		}
		seen |= bit
		if name == "_revisions" {
			var r replicate.Revisions
			if dec.PeekKind() != '{' {
				env.ambiguous = true
				if err := dec.SkipValue(); err != nil {
					return env, errNotObject
				}
				continue
			}
			if err := replicate.DecodeRevisions(dec, &r); err != nil {
				return env, err
			}
			env.revisions, env.hasRevs = r, true
			continue
		}
		vt, err := dec.ReadToken()
		if err != nil {
			return env, errNotObject
		}
		switch k := vt.Kind(); {
		case k == '{' || k == '[':
			env.ambiguous = true
			if err := skipRest(dec); err != nil {
				return env, errNotObject
			}
		case name == "_deleted":
			env.deleted = k == 't'
		case k != '"':
			env.ambiguous = true
		case name == "_id":
			env.id, env.hasID = vt.String(), true
		default: // _rev
			env.rev, env.hasRev = vt.String(), true
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return env, errNotObject
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return env, errNotObject
	}
	if env.ambiguous {
		env.hasID, env.hasRev, env.hasRevs = false, false, false
	}
	return env, nil
}

// The envelope members, as bits.
const (
	bitID = 1 << iota
	bitRev
	bitDeleted
	bitRevisions
)

// envelopeBit returns the bit of an envelope member's name, 0 for any
// other name.
func envelopeBit(name string) int {
	switch name {
	case "_id":
		return bitID
	case "_rev":
		return bitRev
	case "_deleted":
		return bitDeleted
	case "_revisions":
		return bitRevisions
	}
	return 0
}

// skipRest skips the rest of an object or array whose opening token was
// just read.
func skipRest(dec *jsontext.Decoder) error {
	for depth := 1; depth > 0; {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		switch tok.Kind() {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
	}
	return nil
}

// leanForm reports which record fields a writer may leave out because the
// body says the same (see appendRecord): all of id and rev when the body
// carries them; then revisions when the body's `_revisions` equals them or,
// without one, when they are just the rev itself (a first generation, or
// a history cut to one entry); deleted when the body's `_deleted` agrees.
// A revision with unknown history keeps every field.
func leanForm(d *replicate.Doc, env envelope) (lean, omitRevs, omitDeleted bool) {
	if !env.hasID || !env.hasRev || env.id != d.ID || env.rev != d.Rev || len(d.Revisions.IDs) == 0 {
		return false, false, false
	}
	if env.hasRevs {
		omitRevs = equalRevisions(env.revisions, d.Revisions)
	} else {
		omitRevs = equalRevisions(revOnly(d.Rev), d.Revisions)
	}
	return true, omitRevs, env.deleted == d.Deleted
}

// revOnly is the history a record leaves to its rev: the rev alone.
// It is empty for a malformed rev.
func revOnly(rev string) replicate.Revisions {
	gen := replicate.Generation(rev)
	_, hash, ok := strings.Cut(rev, "-")
	if gen < 1 || !ok || hash == "" {
		return replicate.Revisions{}
	}
	return replicate.Revisions{Start: gen, IDs: []string{hash}}
}

func equalRevisions(a, b replicate.Revisions) bool {
	return a.Start == b.Start && len(a.IDs) > 0 && slices.Equal(a.IDs, b.IDs)
}
