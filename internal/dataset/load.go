package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Loader writes databases into a CouchDB-compatible server with
// `_bulk_docs?new_edits=false`, several batches in flight at once.
// The zero value is usable: it takes the defaults documented on each field.
type Loader struct {
	// Client sends the requests; nil means a client whose transport keeps
	// Parallel*DBParallel idle connections per host.
	Client *http.Client
	// BatchDocs is the most revisions per _bulk_docs request; 0 means 500.
	BatchDocs int
	// BatchBytes is the most request-body bytes per _bulk_docs request (a
	// single larger revision still goes alone); 0 means 8 MiB.
	BatchBytes int
	// Parallel is the number of _bulk_docs requests in flight per database;
	// 0 means 4.
	Parallel int
	// DBParallel is the number of databases LoadAll fills at once; 0 means 4.
	DBParallel int
	// Keep leaves an existing database in place and writes into it; by
	// default an existing database is deleted and created anew.
	Keep bool
}

// Result reports one loaded database.
type Result struct {
	DB       string        // database name
	Revs     int           // revisions sent
	Bytes    int64         // request-body bytes sent
	Failures []string      // "id rev: error: reason" for each revision the server refused
	Elapsed  time.Duration // wall time from create to last acknowledged batch
}

func (l *Loader) batchDocs() int  { return orDefault(l.BatchDocs, 500) }
func (l *Loader) batchBytes() int { return orDefault(l.BatchBytes, 8<<20) }
func (l *Loader) parallel() int   { return orDefault(l.Parallel, 4) }
func (l *Loader) dbParallel() int { return orDefault(l.DBParallel, 4) }
func orDefault(v, d int) int {
	if v > 0 {
		return v
	}
	return d
}

var defaultClientOnce sync.Once
var defaultClient *http.Client

func (l *Loader) client() *http.Client {
	if l.Client != nil {
		return l.Client
	}
	defaultClientOnce.Do(func() {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		defaultClient = &http.Client{Transport: t}
	})
	return defaultClient
}

// LoadAll loads dbs into the server at serverURL (for example
// "http://127.0.0.1:5984"), DBParallel databases at once. It returns one
// Result per database in the order of dbs; on error the results of the
// databases that finished are still returned.
func (l *Loader) LoadAll(ctx context.Context, serverURL string, dbs []DB) ([]Result, error) {
	res := make([]Result, len(dbs))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(l.dbParallel())
	for i, db := range dbs {
		g.Go(func() error {
			r, err := l.Load(ctx, serverURL, db)
			res[i] = r
			return err
		})
	}
	err := g.Wait()
	return res, err
}

// Load creates db.Name on the server at serverURL (deleting an existing one
// unless Keep is set) and writes every revision of db. Revisions the server
// refuses are listed in Result.Failures and are not an error; a transport
// error or an unexpected HTTP status is.
func (l *Loader) Load(ctx context.Context, serverURL string, db DB) (Result, error) {
	res := Result{DB: db.Name}
	start := time.Now()
	base, err := url.Parse(strings.TrimRight(serverURL, "/"))
	if err != nil {
		return res, fmt.Errorf("dataset: parse server URL: %w", redactErr(err))
	}
	// the name as one path segment ("/" and "+" escaped, as CouchDB
	// needs them)
	dbURL, err := url.Parse(base.String() + "/" + strings.ReplaceAll(url.PathEscape(db.Name), "+", "%2B"))
	if err != nil {
		return res, fmt.Errorf("dataset: database URL: %w", redactErr(err))
	}
	if err := l.createDB(ctx, dbURL); err != nil {
		return res, err
	}

	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(l.parallel())
	send := func(body []byte, n int) {
		g.Go(func() error {
			fails, err := l.post(gctx, dbURL.JoinPath("_bulk_docs"), body)
			mu.Lock()
			res.Revs += n
			res.Bytes += int64(len(body))
			res.Failures = append(res.Failures, fails...)
			mu.Unlock()
			return err
		})
	}

	var buf bytes.Buffer
	n := 0
	flush := func() {
		if n == 0 {
			return
		}
		buf.WriteString("]}")
		body := bytes.Clone(buf.Bytes())
		send(body, n)
		buf.Reset()
		n = 0
	}
	genErr := db.Each(func(rev []byte) error {
		if err := gctx.Err(); err != nil {
			return err
		}
		if n > 0 && (n >= l.batchDocs() || buf.Len()+len(rev)+2 > l.batchBytes()) {
			flush()
		}
		if n == 0 {
			buf.WriteString(`{"new_edits":false,"docs":[`)
		} else {
			buf.WriteByte(',')
		}
		buf.Write(rev)
		n++
		return nil
	})
	if genErr == nil {
		flush()
	}
	werr := g.Wait()
	res.Elapsed = time.Since(start)
	if werr != nil {
		return res, fmt.Errorf("dataset: load %s: %w", db.Name, werr)
	}
	if genErr != nil {
		return res, fmt.Errorf("dataset: load %s: %w", db.Name, genErr)
	}
	return res, nil
}

// createDB makes an empty database at u: PUT, and on 412 (exists) DELETE
// then PUT again unless Keep is set.
func (l *Loader) createDB(ctx context.Context, u *url.URL) error {
	status, body, err := l.do(ctx, http.MethodPut, u, nil)
	if err != nil {
		return err
	}
	switch {
	case status == http.StatusCreated || status == http.StatusAccepted:
		return nil
	case status == http.StatusPreconditionFailed && l.Keep:
		return nil
	case status == http.StatusPreconditionFailed:
		if st, b, err := l.do(ctx, http.MethodDelete, u, nil); err != nil {
			return err
		} else if st != http.StatusOK && st != http.StatusAccepted {
			return statusErr("DELETE", u, st, b)
		}
		status, body, err = l.do(ctx, http.MethodPut, u, nil)
		if err != nil {
			return err
		}
		if status == http.StatusCreated || status == http.StatusAccepted {
			return nil
		}
	}
	return statusErr("PUT", u, status, body)
}

// post sends one _bulk_docs body and returns the per-revision failures.
func (l *Loader) post(ctx context.Context, u *url.URL, body []byte) ([]string, error) {
	status, resp, err := l.do(ctx, http.MethodPost, u, body)
	if err != nil {
		return nil, err
	}
	if status != http.StatusCreated && status != http.StatusOK && status != http.StatusAccepted {
		return nil, statusErr("POST", u, status, resp)
	}
	var rows []struct {
		ID     string `json:"id"`
		Rev    string `json:"rev"`
		Error  string `json:"error"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(resp, &rows); err != nil {
		return nil, fmt.Errorf("dataset: decode _bulk_docs answer: %w", err)
	}
	var fails []string
	for _, r := range rows {
		if r.Error != "" {
			fails = append(fails, fmt.Sprintf("%s %s: %s: %s", r.ID, r.Rev, r.Error, r.Reason))
		}
	}
	return fails, nil
}

// do sends one request and returns the status and the whole answer body.
func (l *Loader) do(ctx context.Context, method string, u *url.URL, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return 0, nil, fmt.Errorf("dataset: %s %s: %w", method, u.Redacted(), redactErr(err))
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := l.client().Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("dataset: %s %s: %w", method, u.Redacted(), redactErr(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("dataset: %s %s: read answer: %w", method, u.Redacted(), err)
	}
	return resp.StatusCode, b, nil
}

func statusErr(method string, u *url.URL, status int, body []byte) error {
	const max = 300
	if len(body) > max {
		body = body[:max]
	}
	return fmt.Errorf("dataset: %s %s: HTTP %d: %s", method, u.Redacted(), status, bytes.TrimSpace(body))
}

// redactErr strips credentials from a *url.Error's URL.
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if p, perr := url.Parse(ue.URL); perr == nil {
			ue.URL = p.Redacted()
		}
	}
	return err
}
