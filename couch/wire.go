package couch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sofadb/sofa/internal/jsonx"
	"github.com/sofadb/sofa/replicate"
)

// EscapeDB encodes a database name for a URL path by CouchDB's rule:
// every byte but A-Z a-z 0-9 _ . - : is percent-encoded ("/" -> %2F,
// "+" -> %2B).
func EscapeDB(name string) string { return escapeBytes(name) }

// EscapeDocID encodes a document id for a URL path; the `_design/` and
// `_local/` prefixes stay literal (`_design/a/b` -> `_design/a%2Fb`).
func EscapeDocID(id string) string {
	for _, p := range []string{"_design/", "_local/"} {
		if strings.HasPrefix(id, p) && len(id) > len(p) {
			return p + escapeBytes(id[len(p):])
		}
	}
	return escapeBytes(id)
}

// EscapeAttName encodes an attachment name for a URL path.
func EscapeAttName(name string) string { return escapeBytes(name) }

func escapeBytes(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' || c == ':' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// RedactURL returns rawURL with any password replaced by "xxxxx"; an
// unparsable URL is reduced to its scheme and host part.
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		if i := strings.Index(rawURL, "@"); i >= 0 {
			if j := strings.Index(rawURL, "://"); j >= 0 && j < i {
				return rawURL[:j+3] + "xxxxx@" + rawURL[i+1:]
			}
			return "xxxxx@" + rawURL[i+1:]
		}
		return rawURL
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	return u.String()
}

// ParseChanges reads a `_changes` answer (feed=normal) from r and calls fn
// for each row as soon as it is complete; the feed is never buffered
// whole. It returns last_seq. A stream cut before its end returns an
// error (rows already delivered stay delivered).
func ParseChanges(r io.Reader, fn func(replicate.Change) error) (replicate.Seq, error) {
	dec := jsontext.NewDecoder(bufio.NewReaderSize(r, 64<<10))
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, fmt.Errorf("changes: %w", err)
	}
	if tok.Kind() != '{' {
		return nil, fmt.Errorf("changes: answer is not a JSON object")
	}
	var last replicate.Seq
	sawLast := false
	for dec.PeekKind() != '}' {
		kt, err := dec.ReadToken()
		if err != nil {
			return nil, fmt.Errorf("changes: %w", err)
		}
		switch kt.String() {
		case "results":
			if t, err := dec.ReadToken(); err != nil || t.Kind() != '[' {
				return nil, fmt.Errorf("changes: results is not an array")
			}
			for dec.PeekKind() != ']' {
				v, err := dec.ReadValue()
				if err != nil {
					return nil, fmt.Errorf("changes: %w", err)
				}
				c, ok, err := parseChangeRow(v)
				if err != nil {
					return nil, err
				}
				if ok {
					if err := fn(c); err != nil {
						return nil, err
					}
				}
			}
			if _, err := dec.ReadToken(); err != nil {
				return nil, fmt.Errorf("changes: %w", err)
			}
		case "last_seq":
			v, err := dec.ReadValue()
			if err != nil {
				return nil, fmt.Errorf("changes: %w", err)
			}
			last, sawLast = replicate.Seq(bytes.Clone(v)), true
		default:
			if err := dec.SkipValue(); err != nil {
				return nil, fmt.Errorf("changes: %w", err)
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, fmt.Errorf("changes: %w", err)
	}
	if !sawLast {
		return nil, fmt.Errorf("changes: answer ended without last_seq")
	}
	return last, nil
}

func parseChangeRow(v []byte) (replicate.Change, bool, error) {
	var row struct {
		Seq     jsontext.Value `json:"seq"`
		ID      string         `json:"id"`
		Deleted bool           `json:"deleted"`
		Removed bool           `json:"removed"`
		Changes []struct {
			Rev string `json:"rev"`
		} `json:"changes"`
	}
	if err := json.Unmarshal(v, &row); err != nil {
		return replicate.Change{}, false, fmt.Errorf("changes: bad row: %v", err)
	}
	if row.ID == "" {
		return replicate.Change{}, false, nil
	}
	c := replicate.Change{ID: row.ID, Deleted: row.Deleted}
	if len(row.Seq) > 0 && string(row.Seq) != "null" {
		c.Seq = replicate.Seq(bytes.Clone(row.Seq))
	}
	for i, ch := range row.Changes {
		if row.Removed && i == 0 {
			continue
		}
		if ch.Rev != "" {
			c.Revs = append(c.Revs, ch.Rev)
		}
	}
	return c, true, nil
}

// ParseRevsDiff reads a `_revs_diff` answer.
func ParseRevsDiff(r io.Reader) (map[string]replicate.Missing, error) {
	out := map[string]replicate.Missing{}
	if err := json.NewDecoder(r).Decode(&out); err != nil {
		return nil, fmt.Errorf("bad _revs_diff answer: %v", err)
	}
	return out, nil
}

// ParseBulkGet reads a `_bulk_get` JSON answer, one document at a time.
// Per-revision errors come in CouchDB's `{"error":{"id","rev","error",
// "reason"}}` shape, PouchDB Server's flat `{"error":name,"reason":...}`,
// or `{"missing":rev}`.
func ParseBulkGet(r io.Reader) ([]*replicate.Doc, []replicate.DocError, error) {
	dec := jsontext.NewDecoder(bufio.NewReaderSize(r, 64<<10))
	if t, err := dec.ReadToken(); err != nil || t.Kind() != '{' {
		return nil, nil, fmt.Errorf("answer is not a JSON object")
	}
	var docs []*replicate.Doc
	var errs []replicate.DocError
	for dec.PeekKind() != '}' {
		kt, err := dec.ReadToken()
		if err != nil {
			return nil, nil, err
		}
		if kt.String() != "results" {
			if err := dec.SkipValue(); err != nil {
				return nil, nil, err
			}
			continue
		}
		if t, err := dec.ReadToken(); err != nil || t.Kind() != '[' {
			return nil, nil, fmt.Errorf("results is not an array")
		}
		for dec.PeekKind() != ']' {
			v, err := dec.ReadValue()
			if err != nil {
				return nil, nil, err
			}
			var res struct {
				ID   string           `json:"id"`
				Docs []jsontext.Value `json:"docs"`
			}
			if err := json.Unmarshal(v, &res); err != nil {
				return nil, nil, fmt.Errorf("bad result: %v", err)
			}
			for _, entry := range res.Docs {
				d, de, err := parseResultEntry(res.ID, entry)
				if err != nil {
					return nil, nil, err
				}
				if d != nil {
					docs = append(docs, d)
				}
				if de != nil {
					errs = append(errs, *de)
				}
			}
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, nil, err
		}
	}
	return docs, errs, nil
}

// parseResultEntry reads one `{"ok":doc}`, `{"error":...}` or
// `{"missing":rev}` entry (of `_bulk_get` or an open_revs JSON array).
func parseResultEntry(id string, entry []byte) (*replicate.Doc, *replicate.DocError, error) {
	var e struct {
		OK      jsontext.Value `json:"ok"`
		Error   jsontext.Value `json:"error"`
		Reason  string         `json:"reason"`
		Missing string         `json:"missing"`
	}
	if err := json.Unmarshal(entry, &e); err != nil {
		return nil, nil, fmt.Errorf("bad entry: %v", err)
	}
	switch {
	case len(e.OK) > 0:
		d, err := replicate.ParseDoc(e.OK)
		if err != nil {
			return nil, nil, err
		}
		return d, nil, nil
	case e.Missing != "":
		return nil, &replicate.DocError{ID: id, Rev: e.Missing, Error: "not_found", Reason: "missing"}, nil
	case len(e.Error) > 0:
		de := &replicate.DocError{ID: id, Reason: e.Reason}
		if e.Error.Kind() == '{' {
			var inner replicate.DocError
			json.Unmarshal(e.Error, &inner)
			if inner.ID != "" {
				de.ID = inner.ID
			}
			de.Rev, de.Error, de.Reason = inner.Rev, inner.Error, inner.Reason
		} else {
			de.Error = jsonx.Unquote(e.Error)
		}
		return nil, de, nil
	}
	return nil, nil, fmt.Errorf("entry has neither ok nor error")
}

// ParseBulkDocs reads a `_bulk_docs` answer and returns the failures only
// (CouchDB lists only failures with new_edits=false; PouchDB Server may
// list every document).
func ParseBulkDocs(r io.Reader) ([]replicate.DocError, error) {
	var rows []struct {
		ID     string `json:"id"`
		Rev    string `json:"rev"`
		OK     bool   `json:"ok"`
		Error  string `json:"error"`
		Reason string `json:"reason"`
	}
	if err := json.NewDecoder(r).Decode(&rows); err != nil {
		return nil, fmt.Errorf("bad answer: %v", err)
	}
	var out []replicate.DocError
	for _, x := range rows {
		if x.Error != "" {
			out = append(out, replicate.DocError{ID: x.ID, Rev: x.Rev, Error: x.Error, Reason: x.Reason})
		}
	}
	return out, nil
}

// ReadOpenRevs reads a `GET doc?open_revs=[...]` answer: a JSON array of
// entries, or multipart/mixed.
func ReadOpenRevs(contentType string, r io.Reader) ([]*replicate.Doc, []replicate.DocError, error) {
	if strings.HasPrefix(contentType, "multipart/") {
		return readOpenRevsMultipart(contentType, r)
	}
	var entries []jsontext.Value
	if err := json.NewDecoder(r).Decode(&entries); err != nil {
		return nil, nil, fmt.Errorf("bad open_revs answer: %v", err)
	}
	var docs []*replicate.Doc
	var errs []replicate.DocError
	for _, e := range entries {
		d, de, err := parseResultEntry("", e)
		if err != nil {
			return nil, nil, err
		}
		if d != nil {
			docs = append(docs, d)
		}
		if de != nil {
			errs = append(errs, *de)
		}
	}
	return docs, errs, nil
}
