package main

import (
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

// docCount returns doc_count + doc_del_count of the database at dbURL.
func docCount(ctx context.Context, dbURL string) (int64, error) {
	var info struct {
		DocCount int64 `json:"doc_count"`
		DelCount int64 `json:"doc_del_count"`
	}
	err := getJSON(ctx, dbURL, &info)
	return info.DocCount + info.DelCount, err
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

// totalDocs sums docCount over the databases of a server.
func totalDocs(ctx context.Context, serverURL string) (int64, error) {
	dbs, err := userDBs(ctx, serverURL)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, db := range dbs {
		c, err := docCount(ctx, serverURL+"/"+url.PathEscape(db))
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
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

// requestRate measures how many cheap requests (GET /db) per second the
// server at dbURL answers with workers requests in flight, over d.
func requestRate(ctx context.Context, dbURL string, workers int, d time.Duration) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var n, failed atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, dbURL, nil)
				resp, err := httpClient.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 && n.Load() == 0 {
		return 0, fmt.Errorf("request rate probe: %d requests failed", f)
	}
	return float64(n.Load()) / time.Since(t0).Seconds(), nil
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
