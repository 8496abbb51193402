package couch

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/sofadb/sofa/replicate"
)

// readOpenRevsMultipart reads a multipart/mixed open_revs answer: parts of
// application/json (a revision without attachment bytes, or an error
// `{"missing":rev}`), or multipart/related (the revision's JSON, then one
// part per attachment sent, bytes as stored).
func readOpenRevsMultipart(contentType string, r io.Reader) ([]*replicate.Doc, []replicate.DocError, error) {
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil || params["boundary"] == "" {
		return nil, nil, fmt.Errorf("bad multipart content type %q", contentType)
	}
	mr := multipart.NewReader(r, params["boundary"])
	var docs []*replicate.Doc
	var errs []replicate.DocError
	for {
		part, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("multipart: %v", err)
		}
		ct := part.Header.Get("Content-Type")
		mt, pp, _ := mime.ParseMediaType(ct)
		switch {
		case strings.HasPrefix(mt, "multipart/"):
			d, err := readRelated(part, pp["boundary"])
			if err != nil {
				return nil, nil, err
			}
			docs = append(docs, d)
		default:
			body, err := io.ReadAll(part)
			if err != nil {
				return nil, nil, fmt.Errorf("multipart: %v", err)
			}
			if pp["error"] == "true" || bytes.Contains(body[:min(len(body), 64)], []byte(`"missing"`)) && !bytes.Contains(body, []byte(`"_id"`)) {
				_, de, err := parseResultEntry(part.Header.Get("X-Doc-Id"), body)
				if err != nil {
					return nil, nil, err
				}
				if de != nil {
					errs = append(errs, *de)
				}
				continue
			}
			d, err := replicate.ParseDoc(body)
			if err != nil {
				return nil, nil, err
			}
			docs = append(docs, d)
		}
	}
	return docs, errs, nil
}

// readRelated reads one multipart/related revision: JSON first, then the
// attachments marked `follows`, matched by filename or else in order.
func readRelated(r io.Reader, boundary string) (*replicate.Doc, error) {
	if boundary == "" {
		return nil, fmt.Errorf("multipart/related part without boundary")
	}
	mr := multipart.NewReader(r, boundary)
	first, err := mr.NextRawPart()
	if err != nil {
		return nil, fmt.Errorf("multipart/related: %v", err)
	}
	body, err := io.ReadAll(first)
	if err != nil {
		return nil, fmt.Errorf("multipart/related: %v", err)
	}
	d, err := replicate.ParseDoc(body)
	if err != nil {
		return nil, err
	}
	next := 0
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("multipart/related: %v", err)
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("multipart/related: %v", err)
		}
		var att *replicate.Attachment
		if _, dp, err := mime.ParseMediaType(p.Header.Get("Content-Disposition")); err == nil && dp["filename"] != "" {
			for _, a := range d.Atts {
				if a.Name == dp["filename"] {
					att = a
				}
			}
		}
		for att == nil && next < len(d.Atts) {
			if d.Atts[next].Data == nil {
				att = d.Atts[next]
			}
			next++
		}
		if att == nil {
			return nil, fmt.Errorf("multipart/related: attachment part without a matching entry")
		}
		att.Data = data
		if p.Header.Get("Content-Encoding") == "gzip" {
			att.Encoding = "gzip"
			att.EncodedLength = int64(len(data))
		}
	}
	return d, nil
}

// WriteRelated writes doc as a multipart/related body for
// `PUT /db/doc?new_edits=false`: the JSON (attachments with data marked
// `follows`), then one part per such attachment, in the same order, bytes
// as stored. It returns the Content-Type to send.
func WriteRelated(w io.Writer, doc *replicate.Doc) (string, error) {
	mw := multipart.NewWriter(w)
	h := textproto.MIMEHeader{"Content-Type": {"application/json"}}
	pw, err := mw.CreatePart(h)
	if err != nil {
		return "", err
	}
	if _, err := pw.Write(doc.AppendJSON(nil, replicate.Follows)); err != nil {
		return "", err
	}
	for _, a := range doc.Atts {
		if a.Stub || a.Data == nil {
			continue
		}
		ah := textproto.MIMEHeader{
			"Content-Disposition": {mime.FormatMediaType("attachment", map[string]string{"filename": a.Name})},
			"Content-Type":        {a.ContentType},
			"Content-Length":      {strconv.Itoa(len(a.Data))},
		}
		if a.Encoding != "" {
			ah.Set("Content-Encoding", a.Encoding)
		}
		pw, err := mw.CreatePart(ah)
		if err != nil {
			return "", err
		}
		if _, err := pw.Write(a.Data); err != nil {
			return "", err
		}
	}
	if err := mw.Close(); err != nil {
		return "", err
	}
	return `multipart/related; boundary="` + mw.Boundary() + `"`, nil
}
