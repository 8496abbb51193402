package couch

import (
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sofadb/sofa/internal/jsonx"
	"github.com/sofadb/sofa/replicate"
)

// ChangesEnd is what a changes feed says after its rows.
type ChangesEnd struct {
	// LastSeq is last_seq exactly as sent (raw JSON: `42` or
	// `"12-g1AAA"`); nil when the feed ended cleanly without one.
	LastSeq replicate.Seq
	// Pending is the number of changes after LastSeq (CouchDB 2.x+); -1
	// when the feed did not say.
	Pending int64
	// Rows is the number of rows in the feed, skipped ones included (a
	// page of `limit` rows is full when Rows == limit).
	Rows int
}

// FeedError reports a changes feed that broke before its end (connection
// cut, truncated or malformed JSON, an error object inside the stream).
// Every row before the break was delivered in full; the caller resumes with
// since=LastSeq and may see some rows again.
type FeedError struct {
	// Rows is the number of complete rows passed to fn before the break.
	Rows int
	// LastSeq is the seq of the last complete row that carried one (rows
	// may have seq null under seq_interval); nil if no such row was read,
	// in which case the caller resumes from the since it asked with.
	LastSeq replicate.Seq
	// Err is the cause: a read error, io.ErrUnexpectedEOF, a syntax error,
	// or an *Error sent inside the feed.
	Err error
}

func (e *FeedError) Error() string {
	return fmt.Sprintf("changes feed broken after %d complete rows: %v", e.Rows, e.Err)
}

func (e *FeedError) Unwrap() error { return e.Err }

// ParseChanges reads a `_changes?feed=normal` answer from r,
// `{"results":[row,...],"last_seq":S,"pending":N}`, calling fn for each row
// as soon as the row is complete; the feed is never held in memory. Rows
// have the shape `{"seq","id","changes":[{"rev"}...],"deleted"}`: seqs are
// kept raw (`"seq":null` gives a nil Seq), rows with an empty id are
// skipped, `"removed":true` drops the row's first rev (CouchDB's
// replicator rule) and a row left without revs is skipped. Blank lines are
// whitespace.
//
// An error returned by fn stops the parse and is returned as is. A feed that
// breaks before its closing brace gives a *FeedError saying how far it got.
// A body that is a CouchDB error object gives an *Error with Status 0 (Name and Reason set).
func ParseChanges(r io.Reader, fn func(replicate.Change) error) (ChangesEnd, error) {
	p := feedParser{dec: newDecoder(r), fn: fn}
	end, err := p.normal()
	end.Rows = p.seen
	if err != nil && !p.fnErr {
		var ce *Error
		if p.rows == 0 && errors.As(err, &ce) {
			return end, ce
		}
		return end, &FeedError{Rows: p.rows, LastSeq: p.lastSeq, Err: eofAsUnexpected(err)}
	}
	return end, err
}

// ParseContinuousChanges reads a `_changes?feed=continuous` answer from r:
// one row object per line, blank heartbeat lines, and a final
// `{"last_seq":S,"pending":N}` line after which it returns without reading
// further. Rows follow the rules of ParseChanges. A stream that ends, or
// sends an `{"error","reason"}` line, before the last_seq line gives a
// *FeedError.
func ParseContinuousChanges(r io.Reader, fn func(replicate.Change) error) (ChangesEnd, error) {
	p := feedParser{dec: newDecoder(r), fn: fn}
	end, err := p.continuous()
	if err != nil && !p.fnErr {
		return end, &FeedError{Rows: p.rows, LastSeq: p.lastSeq, Err: eofAsUnexpected(err)}
	}
	return end, err
}

type feedParser struct {
	dec     *jsontext.Decoder
	fn      func(replicate.Change) error
	rows    int           // rows delivered
	seen    int           // rows read, skipped ones included
	lastSeq replicate.Seq // seq of the last complete row that had one
	fnErr   bool          // the error came from fn
}

func (p *feedParser) normal() (ChangesEnd, error) {
	end := ChangesEnd{Pending: -1}
	dec := p.dec
	if err := expectDelim(dec, '{'); err != nil {
		return end, err
	}
	var couchErr *Error
	sawLastSeq := false
	for dec.PeekKind() != '}' {
		kt, err := dec.ReadToken()
		if err != nil {
			return end, err
		}
		switch kt.String() {
		case "results":
			if err := p.results(); err != nil {
				return end, err
			}
		case "last_seq":
			sawLastSeq = true
			if end.LastSeq, err = readRaw(dec); err != nil {
				return end, err
			}
		case "pending":
			if end.Pending, err = readPending(dec); err != nil {
				return end, err
			}
		case "error", "reason":
			if couchErr == nil {
				couchErr = &Error{}
			}
			isName := kt.String() == "error" // kt is void after the next read
			s, err := readScalarText(dec)
			if err != nil {
				return end, err
			}
			if isName {
				couchErr.Name = s
			} else {
				couchErr.Reason = s
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return end, err
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return end, err
	}
	if couchErr != nil && couchErr.Name != "" {
		return end, couchErr
	}
	if !sawLastSeq {
		// Every server ends a feed with last_seq: a body closed without
		// it was cut (a proxy, a server stopped mid-answer) and read as
		// the feed's end would lose the rows after it.
		return end, fmt.Errorf("answer without last_seq: %w", io.ErrUnexpectedEOF)
	}
	return end, nil
}

func (p *feedParser) results() error {
	dec := p.dec
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		return err
	}
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	for dec.PeekKind() != ']' {
		var row feedObject
		if err := p.readObject(&row); err != nil {
			return err
		}
		if err := p.deliver(&row); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

func (p *feedParser) continuous() (ChangesEnd, error) {
	end := ChangesEnd{Pending: -1}
	for {
		if p.dec.PeekKind() == 0 {
			// End of input (or a read error) between lines.
			_, err := p.dec.ReadToken()
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // no last_seq line: cut
			}
			return end, err
		}
		var obj feedObject
		if err := p.readObject(&obj); err != nil {
			return end, err
		}
		switch {
		case obj.hasLastSeq:
			end.LastSeq, end.Pending = obj.lastSeq, obj.pending
			return end, nil
		case obj.err != "":
			return end, &Error{Name: obj.err, Reason: obj.reason}
		}
		if err := p.deliver(&obj); err != nil {
			return end, err
		}
	}
}

// deliver hands a complete row to fn unless it is to be skipped.
func (p *feedParser) deliver(o *feedObject) error {
	p.seen++
	if o.seq != nil {
		p.lastSeq = o.seq
	}
	c := &o.Change
	if o.removed && len(c.Revs) > 0 {
		c.Revs = c.Revs[1:]
	}
	if c.ID == "" || len(c.Revs) == 0 {
		return nil
	}
	c.Seq = o.seq
	c.Docs = completeDoc(c, o.doc)
	if err := p.fn(*c); err != nil {
		p.fnErr = true
		return err
	}
	p.rows++
	return nil
}

// feedObject is one object of a feed: a row, a last_seq line or an error.
type feedObject struct {
	replicate.Change
	seq        replicate.Seq
	doc        []byte // include_docs: the winning revision, raw
	removed    bool
	hasLastSeq bool
	lastSeq    replicate.Seq
	pending    int64
	err        string
	reason     string
}

func (p *feedParser) readObject(o *feedObject) error {
	dec := p.dec
	o.pending = -1
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		kt, err := dec.ReadToken()
		if err != nil {
			return err
		}
		switch kt.String() {
		case "seq":
			o.seq, err = readRaw(dec)
		case "id":
			o.ID, err = readStringOrNull(dec, "id")
		case "changes":
			o.Revs, err = readChangeRevs(dec)
		case "deleted":
			o.Deleted, err = readBool(dec)
		case "removed":
			o.removed, err = readBool(dec)
		case "doc":
			o.doc, err = readRaw(dec)
		case "last_seq":
			o.hasLastSeq = true
			o.lastSeq, err = readRaw(dec)
		case "pending":
			o.pending, err = readPending(dec)
		case "error":
			o.err, err = readScalarText(dec)
		case "reason":
			o.reason, err = readScalarText(dec)
		default:
			err = dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// readChangeRevs reads `[{"rev":"1-a"},...]` into its revs.
func readChangeRevs(dec *jsontext.Decoder) ([]string, error) {
	if err := expectDelim(dec, '['); err != nil {
		return nil, fmt.Errorf("changes: %w", err)
	}
	var revs []string
	for dec.PeekKind() != ']' {
		if err := expectDelim(dec, '{'); err != nil {
			return nil, fmt.Errorf("changes entry: %w", err)
		}
		for dec.PeekKind() != '}' {
			kt, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			if kt.String() != "rev" {
				if err := dec.SkipValue(); err != nil {
					return nil, err
				}
				continue
			}
			rev, err := readString(dec, "rev")
			if err != nil {
				return nil, err
			}
			if rev != "" {
				revs = append(revs, rev)
			}
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
	}
	_, err := dec.ReadToken()
	return revs, err
}

// readPending reads pending: an integer, or -1 for null or anything else.
func readPending(dec *jsontext.Decoder) (int64, error) {
	if k := dec.PeekKind(); k == '{' || k == '[' {
		return -1, dec.SkipValue()
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return -1, err
	}
	n, ok := jsonx.Int(tok)
	if !ok {
		return -1, nil
	}
	return n, nil
}

// completeDoc returns the row's included document as the one revision to
// copy when it is the whole story: the row's only leaf, generation 1 (so
// its `_revisions` is just its own hash), live. Otherwise nil: the
// revision is fetched with its history as usual.
func completeDoc(c *replicate.Change, doc []byte) []*replicate.Doc {
	if doc == nil || len(c.Revs) != 1 || c.Deleted || replicate.Generation(c.Revs[0]) != 1 {
		return nil
	}
	d, err := replicate.ParseDocValid(doc)
	if err != nil || d.ID != c.ID || d.Rev != c.Revs[0] || d.Deleted {
		return nil
	}
	return []*replicate.Doc{d}
}
