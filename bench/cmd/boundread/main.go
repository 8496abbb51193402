// Command boundread is the read bound of a backup: the least a tool must
// ask of the source to back it up, read as plainly as possible and thrown
// away, so that its time is the source's own (its CPU serving the
// documents) plus a thin client. No tool that reads every revision with
// its history and attachments can back the databases up faster.
//
//	boundread [-batch 500] [-parallel 4] [-page 10000] [-multipart] SERVER_URL DB...
//
// Per database, one after another: page through
// _changes?style=all_docs&seq_interval=BATCH (PAGE rows a page, as sofa
// asks of CouchDB); every BATCH leaf revisions are read with one
// _bulk_get?revs=true&attachments=true, up to PARALLEL in flight, the next
// page read meanwhile; the answers are read to the end and not parsed.
// -multipart asks for the _bulk_get answers as multipart/mixed
// (attachments as raw parts in their stored encoding, as sofa reads
// them) instead of JSON with base64 attachments.
// (The same in Node.js, bench/bound-read.js before it, spent as much CPU
// receiving the answers as sofa's whole backup, 0.58 CPU-s for 10,000 x 1
// KiB against 0.04-0.09 here, and so left the server less of a 2-core
// machine than sofa did: it was no bound.)
//
// Prints {"tool":"bound-read","ms":..,"docs":revisions,"bytes":answer bytes,"multipart":bool}.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type ref struct {
	ID  string `json:"id"`
	Rev string `json:"rev"`
}

type reader struct {
	hc             *http.Client
	base, user, pw string
	batch, par     int
	page           int
	multipart      bool
	bytes, docs    atomic.Int64
}

func (r *reader) do(method, path, accept string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, r.base+path, rd)
	if err != nil {
		return nil, err
	}
	if r.user != "" {
		req.SetBasicAuth(r.user, r.pw)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: HTTP %d", method, strings.SplitN(path, "?", 2)[0], resp.StatusCode)
	}
	return resp, nil
}

func (r *reader) bulkGet(db string, refs []ref) error {
	body, _ := json.Marshal(map[string]any{"docs": refs})
	accept := "application/json"
	if r.multipart {
		accept = "multipart/mixed"
	}
	resp, err := r.do("POST", "/"+url.PathEscape(db)+"/_bulk_get?revs=true&attachments=true", accept, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	r.bytes.Add(n)
	return err
}

func (r *reader) readDB(db string) error {
	sem := make(chan struct{}, r.par)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := func(refs []ref) {
		sem <- struct{}{}
		r.docs.Add(int64(len(refs)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := r.bulkGet(db, refs); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	since := json.RawMessage(`0`)
	for {
		s := string(since)
		if len(s) > 0 && s[0] == '"' {
			_ = json.Unmarshal(since, &s)
		}
		resp, err := r.do("GET", fmt.Sprintf("/%s/_changes?style=all_docs&seq_interval=%d&limit=%d&since=%s",
			url.PathEscape(db), r.batch, r.page, url.QueryEscape(s)), "application/json", nil)
		if err != nil {
			return err
		}
		var feed struct {
			Results []struct {
				ID      string `json:"id"`
				Changes []struct {
					Rev string `json:"rev"`
				} `json:"changes"`
			} `json:"results"`
			LastSeq json.RawMessage `json:"last_seq"`
		}
		err = json.NewDecoder(resp.Body).Decode(&feed)
		resp.Body.Close()
		if err != nil {
			return err
		}
		var refs []ref
		for _, row := range feed.Results {
			for _, c := range row.Changes {
				refs = append(refs, ref{row.ID, c.Rev})
			}
			if len(refs) >= r.batch {
				start(refs)
				refs = nil
			}
		}
		if len(refs) > 0 {
			start(refs)
		}
		if len(feed.Results) < r.page {
			break
		}
		since = feed.LastSeq
	}
	wg.Wait()
	return firstErr
}

func main() {
	batch := flag.Int("batch", 500, "revisions per _bulk_get")
	par := flag.Int("parallel", 4, "_bulk_get requests in flight")
	page := flag.Int("page", 10000, "_changes rows per page")
	multipart := flag.Bool("multipart", false, "ask for _bulk_get answers as multipart/mixed (raw attachments)")
	flag.Parse()
	if flag.NArg() < 2 {
		fmt.Fprintln(os.Stderr, "usage: boundread [-batch N] [-parallel N] [-page N] [-multipart] SERVER_URL DB...")
		os.Exit(2)
	}
	u, err := url.Parse(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "boundread:", err)
		os.Exit(2)
	}
	r := &reader{batch: *batch, par: *par, page: *page, multipart: *multipart,
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *par + 1, DisableCompression: true}}}
	if u.User != nil {
		r.user = u.User.Username()
		r.pw, _ = u.User.Password()
		u.User = nil
	}
	r.base = strings.TrimRight(u.String(), "/")
	t0 := time.Now()
	for _, db := range flag.Args()[1:] {
		if err := r.readDB(db); err != nil {
			json.NewEncoder(os.Stdout).Encode(map[string]any{"tool": "bound-read", "ok": false, "error": err.Error()})
			os.Exit(1)
		}
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"tool": "bound-read", "ok": true,
		"ms": float64(time.Since(t0).Microseconds()) / 1000, "docs": r.docs.Load(), "bytes": r.bytes.Load(),
		"batch": *batch, "parallel": *par, "page": *page, "multipart": *multipart})
}
