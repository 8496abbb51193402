package couch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"strconv"
	"strings"

	"github.com/sofadb/sofa/replicate"
)

// readRelated reads one multipart/related revision: its JSON, then one part
// per `_attachments` entry marked "follows":true, matched by the part's
// Content-Disposition filename, or else in order. Bytes are kept exactly as
// received; Content-Encoding gzip sets Encoding "gzip". Every follows entry
// must get its part, and a part's length must match its Content-Length and
// the entry's stored length when those are given.
func readRelated(r io.Reader, boundary string) (*replicate.Doc, error) {
	if boundary == "" {
		return nil, errors.New("multipart/related part without boundary")
	}
	src := &eofTracker{r: r}
	mr := multipart.NewReader(src, boundary)
	first, err := mr.NextRawPart()
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // not even the JSON part
	}
	if err != nil {
		return nil, fmt.Errorf("multipart/related: %w", err)
	}
	raw, err := io.ReadAll(first)
	if err != nil {
		return nil, fmt.Errorf("multipart/related: %w", err)
	}
	d, err := replicate.ParseDoc(raw)
	if err != nil {
		return nil, err
	}
	names, err := followsNames(raw)
	if err != nil {
		return nil, err
	}
	pending := make([]*replicate.Attachment, 0, len(names))
	for _, n := range names {
		for _, a := range d.Atts {
			if a.Name == n && a.Data == nil {
				pending = append(pending, a)
				break
			}
		}
	}
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF && !src.endedAt(boundary) {
			err = io.ErrUnexpectedEOF
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("multipart/related: %w", err)
		}
		if len(pending) == 0 {
			return nil, fmt.Errorf("doc %q: attachment part beyond the follows entries", d.ID)
		}
		i := 0
		if name := dispositionFilename(p.Header.Get("Content-Disposition")); name != "" {
			for j, a := range pending {
				if a.Name == name {
					i = j
					break
				}
			}
		}
		a := pending[i]
		pending = append(pending[:i], pending[i+1:]...)
		if err := readAttachmentPart(p, a); err != nil {
			return nil, fmt.Errorf("doc %q: attachment %q: %w", d.ID, a.Name, err)
		}
	}
	if len(pending) > 0 {
		return nil, fmt.Errorf("doc %q: attachment %q announced but not sent", d.ID, pending[0].Name)
	}
	return d, nil
}

func readAttachmentPart(p *multipart.Part, a *replicate.Attachment) error {
	if enc := strings.TrimSpace(p.Header.Get("Content-Encoding")); enc != "" && !strings.EqualFold(enc, "identity") {
		a.Encoding = strings.ToLower(enc)
	}
	want := int64(-1)
	if cl := p.Header.Get("Content-Length"); cl != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(cl), 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("bad Content-Length %q", cl)
		}
		want = n
	}
	if want < 0 && (a.Encoding == "" || a.EncodedLength > 0) && a.StoredLength() > 0 {
		want = a.StoredLength()
	}
	var buf bytes.Buffer
	if want > 0 && want <= 64<<20 {
		buf.Grow(int(want) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(p); err != nil {
		return err
	}
	data := buf.Bytes()
	if data == nil {
		data = []byte{}
	}
	if want >= 0 && int64(len(data)) != want {
		return fmt.Errorf("got %d bytes, want %d", len(data), want)
	}
	if a.Encoding != "" && a.EncodedLength == 0 {
		a.EncodedLength = int64(len(data))
	}
	if a.Encoding == "" && a.Length == 0 {
		a.Length = int64(len(data))
	}
	a.Data = data
	return nil
}

// followsNames lists, in order, the names of the `_attachments` entries of
// a revision's JSON that are marked "follows":true.
func followsNames(raw []byte) ([]string, error) {
	dec := newDecoder(bytes.NewReader(raw))
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	var names []string
	for dec.PeekKind() != '}' {
		kt, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		if kt.String() != "_attachments" || dec.PeekKind() != '{' {
			if err := dec.SkipValue(); err != nil {
				return nil, err
			}
			continue
		}
		dec.ReadToken() // '{', checked by PeekKind
		for dec.PeekKind() != '}' {
			name, err := readString(dec, "attachment name")
			if err != nil {
				return nil, err
			}
			if err := expectDelim(dec, '{'); err != nil {
				return nil, err
			}
			follows := false
			for dec.PeekKind() != '}' {
				ft, err := dec.ReadToken()
				if err != nil {
					return nil, err
				}
				isFollows := ft.String() == "follows"
				v, err := dec.ReadValue()
				if err != nil {
					return nil, err
				}
				if isFollows && string(v) == "true" {
					follows = true
				}
			}
			if _, err := dec.ReadToken(); err != nil {
				return nil, err
			}
			if follows {
				names = append(names, name)
			}
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
	}
	return names, nil
}
