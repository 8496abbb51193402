package verify

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sofadb/sofa/replicate"
)

// Spooled makes a source that delivers its revisions inline with its
// changes feed (an archive, read once as a stream) comparable in Full
// mode: while Compare reads its feed, every revision's envelope, body and
// attachment metadata (not the attachment bytes) is written to a temporary
// file in dir ("" for the default), and FetchRevs reads them back from it.
// Of each attachment's bytes it keeps the SHA-256 and size of the decoded
// content, so an attachment whose digest differs from the other side's
// (servers digest the same bytes differently) is compared by content.
// Memory holds one file offset per revision. Close removes the file.
type Spooled struct {
	replicate.Source
	f    *os.File
	w    *bufio.Writer
	cw   *countWriter
	offs map[revKey]int64
	// docs and dels count the documents whose leaves its feed delivered,
	// by whether every leaf is deleted (FeedCounts).
	docs, dels int64
}

// FeedCounts returns the documents the feed delivered, live and deleted
// (a document is deleted when each of its leaves is), counted from the
// archive's records rather than the source's counts the archive recorded
// when its backup started: documents written or deleted while it ran
// are in the records. Zero before the feed is read.
func (s *Spooled) FeedCounts() (docs, deleted int64) { return s.docs, s.dels }

// spooledDoc is what is kept of a revision.
type spooledDoc struct {
	ID, Rev   string
	Deleted   bool
	Revisions replicate.Revisions
	Body      []byte
	Atts      []replicate.Attachment
	Content   []contentSum // per entry of Atts
}

// contentSum identifies an attachment's decoded content (gunzipped when
// stored gzip): its SHA-256 and size. Err says why it could not be read.
type contentSum struct {
	Sum [32]byte
	N   int64
	Err string
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// NewSpooled wraps src, spooling into a new temporary file in dir.
func NewSpooled(src replicate.Source, dir string) (*Spooled, error) {
	f, err := os.CreateTemp(dir, "sofa-verify-*")
	if err != nil {
		return nil, fmt.Errorf("verify: spool file: %w", err)
	}
	os.Remove(f.Name()) // unlinked: gone when closed, even after a crash
	return &Spooled{Source: src, f: f, offs: map[revKey]int64{}}, nil
}

// Close removes the spool file.
func (s *Spooled) Close() error { return s.f.Close() }

// Changes passes the feed on and spools every inline revision.
func (s *Spooled) Changes(ctx context.Context, since replicate.Seq, fn func(replicate.Change) error) error {
	s.w = bufio.NewWriterSize(s.f, 256<<10)
	s.cw = &countWriter{w: s.w}
	// An archive lists a document's leaves in separate records, possibly
	// far apart; Compare takes a repeated id as superseding the earlier
	// row (a changes feed's rule), so each row carries every leaf seen so
	// far, deleted only while all of them are. A record whose revision
	// history holds an earlier record's revision supersedes it (a document
	// changed while the backup ran is stored at both revisions): only
	// the leaves of the revision tree the records make are listed.
	ids := map[string]*leafSet{}
	err := s.Source.Changes(ctx, since, func(c replicate.Change) error {
		for _, d := range c.Docs {
			if err := s.spool(d); err != nil {
				return err
			}
		}
		e := ids[c.ID]
		if e == nil {
			e = &leafSet{}
			ids[c.ID] = e
		}
		for _, d := range c.Docs {
			if err := e.add(d, s.historyOf); err != nil {
				return err
			}
		}
		if len(c.Docs) > 0 {
			c.Revs, c.Deleted = e.list()
		}
		return fn(c)
	})
	s.docs, s.dels = 0, 0
	for _, e := range ids {
		if e.deleted() {
			s.dels++
		} else {
			s.docs++
		}
	}
	if ferr := s.w.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("verify: spool file: %w", ferr)
	}
	return err
}

// historyOf reads back the revision history of a spooled revision.
func (s *Spooled) historyOf(id, rev string) (replicate.Revisions, error) {
	off, ok := s.offs[revKey{id, rev}]
	if !ok {
		return replicate.Revisions{}, nil
	}
	if err := s.w.Flush(); err != nil {
		return replicate.Revisions{}, fmt.Errorf("verify: spool file: %w", err)
	}
	var sd spooledDoc
	if err := gob.NewDecoder(bufio.NewReader(io.NewSectionReader(s.f, off, 1<<62))).Decode(&sd); err != nil {
		return replicate.Revisions{}, fmt.Errorf("verify: spool file: %w", err)
	}
	return sd.Revisions, nil
}

func (s *Spooled) spool(d *replicate.Doc) error {
	sd := spooledDoc{ID: d.ID, Rev: d.Rev, Deleted: d.Deleted, Revisions: d.Revisions, Body: d.Body}
	for _, a := range d.Atts {
		m := *a
		m.Data = nil
		m.Stub = true
		sd.Atts = append(sd.Atts, m)
		sd.Content = append(sd.Content, sumOf(a))
	}
	s.offs[revKey{d.ID, d.Rev}] = s.cw.n
	// One encoder per record so each can be decoded alone.
	if err := gob.NewEncoder(s.cw).Encode(&sd); err != nil {
		return fmt.Errorf("verify: spool file: %w", err)
	}
	return nil
}

// FetchRevs reads spooled revisions; one never delivered by the feed is a
// per-revision not_found error.
func (s *Spooled) FetchRevs(ctx context.Context, reqs []replicate.RevRequest) ([]*replicate.Doc, []replicate.DocError, error) {
	var docs []*replicate.Doc
	var errs []replicate.DocError
	for _, q := range reqs {
		off, ok := s.offs[revKey{q.ID, q.Rev}]
		if !ok {
			errs = append(errs, replicate.DocError{ID: q.ID, Rev: q.Rev, Error: "not_found", Reason: "not in the archive"})
			continue
		}
		var sd spooledDoc
		if err := gob.NewDecoder(bufio.NewReader(io.NewSectionReader(s.f, off, 1<<62))).Decode(&sd); err != nil {
			return nil, nil, fmt.Errorf("verify: spool file: %w", err)
		}
		d := &replicate.Doc{ID: sd.ID, Rev: sd.Rev, Deleted: sd.Deleted, Revisions: sd.Revisions, Body: sd.Body}
		for i := range sd.Atts {
			d.Atts = append(d.Atts, &sd.Atts[i])
		}
		docs = append(docs, d)
	}
	return docs, errs, nil
}

// sumOf reads the content of an attachment the source delivered with its
// bytes.
func sumOf(a *replicate.Attachment) contentSum {
	if a.Data == nil {
		return contentSum{Err: "its bytes did not come with the revision"}
	}
	var c contentSum
	var err error
	c.Sum, c.N, err = hashPlain(bytes.NewReader(a.Data), a.Encoding)
	if err != nil {
		c.Err = err.Error()
	}
	return c
}

// hashPlain hashes content stored in encoding ("" or "gzip").
func hashPlain(r io.Reader, encoding string) (sum [32]byte, n int64, err error) {
	if encoding == "gzip" {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return sum, 0, fmt.Errorf("stored gzip bytes do not decode: %w", err)
		}
		r = zr
	}
	h := sha256.New()
	n, err = io.Copy(h, r)
	if err != nil {
		if encoding == "gzip" {
			return sum, 0, fmt.Errorf("stored gzip bytes do not decode: %w", err)
		}
		return sum, 0, err
	}
	h.Sum(sum[:0])
	return sum, n, nil
}

// content gives the decoded content's SHA-256 and size of attachment name
// of a spooled revision.
func (s *Spooled) content(docID, rev, name string) ([32]byte, int64, error) {
	off, ok := s.offs[revKey{docID, rev}]
	if !ok {
		return [32]byte{}, 0, errors.New("the revision is not in the archive")
	}
	var sd spooledDoc
	if err := gob.NewDecoder(bufio.NewReader(io.NewSectionReader(s.f, off, 1<<62))).Decode(&sd); err != nil {
		return [32]byte{}, 0, fmt.Errorf("spool file: %w", err)
	}
	for i, a := range sd.Atts {
		if a.Name == name && i < len(sd.Content) {
			c := sd.Content[i]
			if c.Err != "" {
				return [32]byte{}, 0, errors.New(c.Err)
			}
			return c.Sum, c.N, nil
		}
	}
	return [32]byte{}, 0, fmt.Errorf("the revision has no attachment %q", name)
}

// Attachment is not available: only metadata and a hash of the content
// are spooled.
func (s *Spooled) Attachment(ctx context.Context, docID, rev string, att *replicate.Attachment) error {
	return errors.New("attachment bytes are not kept while verifying an archive")
}
