package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sofadb/sofa/internal/dataset"
)

var httpClient = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: t, Timeout: 5 * time.Minute}
}()

// getJSON GETs u and decodes a 200 answer into v.
func getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", redact(u), resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// userDBs lists the server's databases without the system ones (_*).
func userDBs(ctx context.Context, serverURL string) ([]string, error) {
	var names []string
	if err := getJSON(ctx, serverURL+"/_all_dbs", &names); err != nil {
		return nil, err
	}
	out := names[:0]
	for _, n := range names {
		if !strings.HasPrefix(n, "_") {
			out = append(out, n)
		}
	}
	return out, nil
}

// load writes dbs into the server (untimed set-up).
func (e *env) load(ctx context.Context, serverURL string, dbs []dataset.DB, dbParallel int) error {
	t0 := time.Now()
	l := dataset.Loader{Parallel: 4, DBParallel: dbParallel}
	res, err := l.LoadAll(ctx, serverURL, dbs)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	var revs int
	var bytes int64
	for _, r := range res {
		if len(r.Failures) > 0 {
			return fmt.Errorf("load %s: %d revisions refused, first: %s", r.DB, len(r.Failures), r.Failures[0])
		}
		revs += r.Revs
		bytes += r.Bytes
	}
	e.logf("loaded %d databases, %d revisions, %.1f MiB in %s", len(res), revs, float64(bytes)/(1<<20), time.Since(t0).Round(time.Millisecond))
	return nil
}

// synthDBs returns n synthetic databases named prefix-0000.. of docs
// documents of size bytes each.
func synthDBs(prefix string, n, docs, size int) []dataset.DB {
	out := make([]dataset.DB, n)
	for i := range out {
		out[i] = dataset.Synth{Name: fmt.Sprintf("%s-%04d", prefix, i), Docs: docs, MinSize: size, Seed: uint64(i + 1)}.DB()
	}
	return out
}

// requestRate measures how many requests per second a server answers with
// workers requests in flight. It issues next(ctx, 0), next(ctx, 1), ...
// until d has passed or n requests were issued (n <= 0: no cap), lets the
// ones in flight finish, and returns the answers per second over that time
// and how many requests were answered (requests 0..done-1, each with a
// 2xx). The first transport error or non-2xx answer stops every worker and
// is returned.
func requestRate(ctx context.Context, workers int, d time.Duration, n int, next func(ctx context.Context, i int) (*http.Request, error)) (rate float64, done int, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var issued, answered atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	deadline := t0.Add(d)
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(deadline) {
				i := int(issued.Add(1) - 1)
				if n > 0 && i >= n {
					return
				}
				if err := doDrain(ctx, next, i); err != nil {
					cancel(err)
					return
				}
				answered.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	if err := context.Cause(ctx); err != nil {
		return 0, 0, err
	}
	done = int(answered.Load())
	return float64(done) / elapsed.Seconds(), done, nil
}

// doDrain sends next(ctx, i), reads the answer to its end and fails on
// anything but a 2xx.
func doDrain(ctx context.Context, next func(ctx context.Context, i int) (*http.Request, error), i int) error {
	req, err := next(ctx, i)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", req.Method, redact(req.URL.String()), err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: HTTP %d", req.Method, redact(req.URL.String()), resp.StatusCode)
	}
	return err
}

// newRequest builds a request with a JSON body (nil: none) that can be
// sent once.
func newRequest(ctx context.Context, method, u string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// gzipSize returns the size of path after gzip -6.
func gzipSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var c counter
	zw, _ := gzip.NewWriterLevel(&c, 6)
	if _, err := io.Copy(zw, f); err != nil {
		return 0, err
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	return c.n, nil
}

type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// redact drops user info from a URL for messages.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "<url>"
	}
	p.User = nil
	return p.String()
}
