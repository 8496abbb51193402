package couch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"
)

// DBUpdate is one row of `GET /_db_updates`: a database created, updated
// or deleted on the server.
type DBUpdate struct {
	DBName string `json:"db_name"`
	// Type is "created", "updated" or "deleted" (CouchDB also sends
	// "ddoc_updated").
	Type string `json:"type"`
	// Seq is the feed's position after this row (opaque; "" when the
	// server sent none); resume with it as since.
	Seq string `json:"-"`
}

// ErrNoDBUpdates says the server has no `_db_updates` feed (PouchDB
// Server answers 400, CouchDB before 1.4 404): watch it by listing its
// databases instead.
var ErrNoDBUpdates = errors.New("the server has no _db_updates feed")

// DefaultDBUpdatesHeartbeat is the heartbeat DBUpdates asks for when its
// heartbeat argument is zero: an empty line every 10 s keeps the stream
// alive through proxies and within the client's AttemptTimeout.
const DefaultDBUpdatesHeartbeat = 10 * time.Second

// DBUpdates follows the server's `GET /_db_updates?feed=continuous`
// starting after since ("now": from the present on; "": from the
// beginning), calling fn for each row as it arrives. opened, if not nil,
// is called once the server has answered with the feed's headers: every
// change after that moment is delivered. It returns when ctx ends
// (ctx.Err()), when fn fails (its error), or when the stream breaks or
// ends (an error; the caller reconnects with the last row's Seq). A
// server without the feed gives ErrNoDBUpdates.
//
// The feed holds one connection but no limiter slot: the request takes
// one only until its headers arrive.
func (s *Server) DBUpdates(ctx context.Context, since string, heartbeat time.Duration, opened func(), fn func(DBUpdate) error) error {
	if heartbeat <= 0 {
		heartbeat = DefaultDBUpdatesHeartbeat
	}
	q := "feed=continuous&heartbeat=" + strconv.FormatInt(heartbeat.Milliseconds(), 10)
	if since != "" {
		q += "&since=" + url.QueryEscape(since)
	}
	resp, err := s.do(ctx, &request{Method: "GET", Path: "/_db_updates", Query: q, Stream: true, NoRetry: true})
	if err != nil {
		if st := StatusOf(err); st == 400 || st == 404 || st == 405 || st == 501 {
			return fmt.Errorf("%s: GET /_db_updates: %w (%w)", s.URL(), ErrNoDBUpdates, err)
		}
		return s.describe(err)
	}
	defer resp.Body.Close()
	if opened != nil {
		opened()
	}
	err = ParseDBUpdates(resp.Body, fn)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil {
		return fmt.Errorf("%s: GET /_db_updates: the feed ended", s.URL())
	}
	return err
}

// DBUpdatesNow returns the `_db_updates` feed's present position: the
// last_seq of `GET /_db_updates?feed=normal&since=now`, which CouchDB
// answers at once. A continuous feed started from it (DBUpdates with that
// since) delivers every change after the moment it was read, whenever
// that feed connects; CouchDB 3 sends a continuous feed's headers only
// with its first row or heartbeat, so DBUpdates' opened, from "now",
// comes up to a heartbeat late. A server without the feed gives
// ErrNoDBUpdates; one whose answer has no last_seq gives an error.
func (s *Server) DBUpdatesNow(ctx context.Context) (string, error) {
	resp, err := s.do(ctx, &request{Method: "GET", Path: "/_db_updates", Query: "feed=normal&since=now"})
	if err != nil {
		if st := StatusOf(err); st == 400 || st == 404 || st == 405 || st == 501 {
			return "", fmt.Errorf("%s: GET /_db_updates: %w (%w)", s.URL(), ErrNoDBUpdates, err)
		}
		return "", s.describe(err)
	}
	defer resp.Body.Close()
	var out struct {
		LastSeq json.RawMessage `json:"last_seq"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return "", fmt.Errorf("%s: GET /_db_updates: bad answer: %w", s.URL(), err)
	}
	seq := rawSeq(out.LastSeq)
	if seq == "" {
		return "", fmt.Errorf("%s: GET /_db_updates?since=now: the answer has no last_seq", s.URL())
	}
	return seq, nil
}

// ParseDBUpdates reads a continuous `_db_updates` feed from r: one JSON
// object per line (`{"db_name","type","seq"}`), blank heartbeat lines,
// and possibly a closing `{"last_seq":S}` line (after which it returns
// nil). An `{"error","reason"}` line gives an *Error; a broken line or the
// end of r gives an error wrapping io.ErrUnexpectedEOF; an error from fn is
// returned as is.
func ParseDBUpdates(r io.Reader, fn func(DBUpdate) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue // heartbeat
		}
		var row struct {
			DBName  string          `json:"db_name"`
			Type    string          `json:"type"`
			Seq     json.RawMessage `json:"seq"`
			LastSeq json.RawMessage `json:"last_seq"`
			Error   string          `json:"error"`
			Reason  string          `json:"reason"`
		}
		if err := json.Unmarshal(line, &row); err != nil {
			return fmt.Errorf("_db_updates: bad row %.80q: %w: %w", line, err, io.ErrUnexpectedEOF)
		}
		switch {
		case row.Error != "":
			return &Error{Name: row.Error, Reason: row.Reason}
		case row.LastSeq != nil && row.DBName == "":
			return nil
		case row.DBName == "":
			continue
		}
		u := DBUpdate{DBName: row.DBName, Type: row.Type, Seq: rawSeq(row.Seq)}
		if err := fn(u); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("_db_updates: %w", err)
		}
		return fmt.Errorf("_db_updates: %w: %w", err, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("_db_updates: the stream ended: %w", io.ErrUnexpectedEOF)
}

// rawSeq gives a seq as text: a JSON string unquoted, a number as it is.
func rawSeq(b json.RawMessage) string {
	if len(b) == 0 || string(b) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(b, &s) == nil {
		return s
	}
	return string(b)
}
