// Command boundingest is the ingest bound of a copy with attachments: the
// time the target takes to store a database's documents with their
// attachments, written the way CouchDB takes them most cheaply
// (multipart/related PUTs with new_edits=false, attachments as raw parts,
// not base64) and with nothing read meanwhile. No copy of the database can
// finish before its target has stored it, so no copy can be faster.
//
//	boundingest [-parallel 8] [-spool DIR] SOURCE_DB_URL TARGET_DB_URL
//
// Untimed: every document is read from the source with its revision
// history and attachments (GET /db/doc?revs=true&attachments=true,
// Accept: multipart/related) into a spool file under DIR, unless DIR
// already holds a complete spool of the same source (same update_seq);
// the target database is created. Timed: the spooled documents are PUT to
// the target, PARALLEL in flight, each answer read to the end.
//
// For a database of one leaf per document and no tombstones (the seeds'
// atts_db); anything else is refused, since GET of one document reads its
// winning revision only.
//
// Prints {"tool":"bound-ingest-atts","ms":..,"docs":..,"bytes":..}.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type client struct {
	hc *http.Client
}

// do sends one request to u (credentials in u are sent as basic auth) and
// returns the answer of status want.
func (c *client) do(method, u string, body io.Reader, ctype, accept string, want ...int) (*http.Response, error) {
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return nil, err
	}
	if pu, err := url.Parse(u); err == nil && pu.User != nil {
		pw, _ := pu.User.Password()
		req.SetBasicAuth(pu.User.Username(), pw)
		pu.User = nil
		req.URL = pu
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Accept", accept)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	for _, w := range want {
		if resp.StatusCode == w {
			return resp, nil
		}
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	resp.Body.Close()
	return nil, fmt.Errorf("%s %s: HTTP %d %s", method, redact(u), resp.StatusCode, strings.TrimSpace(string(msg)))
}

func redact(u string) string {
	if pu, err := url.Parse(u); err == nil {
		pu.User = nil
		pu.RawQuery = ""
		return pu.String()
	}
	return "?"
}

// spooled is one document ready to PUT.
type spooled struct {
	ID    string `json:"id"`
	File  string `json:"file"`
	CType string `json:"ctype"`
	Size  int64  `json:"size"`
}

type spoolIndex struct {
	UpdateSeq json.RawMessage `json:"update_seq"`
	Docs      []spooled       `json:"docs"`
}

func (c *client) getJSON(u string, v any) error {
	resp, err := c.do("GET", u, nil, "", "application/json", 200)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// spool reads every document of src into dir (or reuses a complete spool of
// the same update_seq there).
func (c *client) spool(src, dir string, par int) (*spoolIndex, error) {
	var info struct {
		UpdateSeq json.RawMessage `json:"update_seq"`
		DocCount  int             `json:"doc_count"`
		DelCount  int             `json:"doc_del_count"`
	}
	if err := c.getJSON(src, &info); err != nil {
		return nil, err
	}
	if info.DelCount > 0 {
		return nil, fmt.Errorf("source has %d tombstones: not a database this bound reads", info.DelCount)
	}
	idxPath := filepath.Join(dir, "index.json")
	if b, err := os.ReadFile(idxPath); err == nil {
		var old spoolIndex
		if json.Unmarshal(b, &old) == nil && string(old.UpdateSeq) == string(info.UpdateSeq) && len(old.Docs) == info.DocCount {
			return &old, nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var feed struct {
		Results []struct {
			ID      string `json:"id"`
			Changes []struct {
				Rev string `json:"rev"`
			} `json:"changes"`
		} `json:"results"`
	}
	if err := c.getJSON(src+"/_changes?style=all_docs", &feed); err != nil {
		return nil, err
	}
	idx := &spoolIndex{UpdateSeq: info.UpdateSeq, Docs: make([]spooled, len(feed.Results))}
	err := forEach(len(feed.Results), par, func(i int) error {
		row := feed.Results[i]
		if len(row.Changes) != 1 {
			return fmt.Errorf("document %q has %d leaves: not a database this bound reads", row.ID, len(row.Changes))
		}
		d, err := c.spoolOne(src, dir, i, row.ID)
		idx.Docs[i] = d
		return err
	})
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(idx)
	if err != nil {
		return nil, err
	}
	return idx, os.WriteFile(idxPath, b, 0o644)
}

func (c *client) spoolOne(src, dir string, i int, id string) (spooled, error) {
	resp, err := c.do("GET", src+"/"+url.PathEscape(id)+"?revs=true&attachments=true", nil, "", "multipart/related", 200)
	if err != nil {
		return spooled{}, err
	}
	defer resp.Body.Close()
	ctype := resp.Header.Get("Content-Type")
	if !strings.HasPrefix(ctype, "multipart/related") && !strings.HasPrefix(ctype, "application/json") {
		return spooled{}, fmt.Errorf("GET %s: answer of type %q", id, ctype)
	}
	file := filepath.Join(dir, fmt.Sprintf("%06d", i))
	f, err := os.Create(file)
	if err != nil {
		return spooled{}, err
	}
	n, err := io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return spooled{ID: id, File: file, CType: ctype, Size: n}, err
}

// ingest PUTs every spooled document to tgt, par in flight.
func (c *client) ingest(tgt string, idx *spoolIndex, par int) (int64, error) {
	var bytes atomic.Int64
	err := forEach(len(idx.Docs), par, func(i int) error {
		d := idx.Docs[i]
		f, err := os.Open(d.File)
		if err != nil {
			return err
		}
		defer f.Close()
		resp, err := c.do("PUT", tgt+"/"+url.PathEscape(d.ID)+"?new_edits=false", f, d.CType, "application/json", 201, 202)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		bytes.Add(d.Size)
		return nil
	})
	return bytes.Load(), err
}

// forEach calls fn(0..n-1), par at a time, and returns the first error
// (the workers stop taking new indexes after it).
func forEach(n, par int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var failed atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func main() {
	par := flag.Int("parallel", 8, "PUTs in flight")
	dir := flag.String("spool", filepath.Join(os.TempDir(), "boundingest-spool"), "spool directory (kept and reused for the same source)")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: boundingest [-parallel N] [-spool DIR] SOURCE_DB_URL TARGET_DB_URL")
		os.Exit(2)
	}
	src, tgt := strings.TrimRight(flag.Arg(0), "/"), strings.TrimRight(flag.Arg(1), "/")
	c := &client{hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *par + 2}}}
	fail := func(err error) {
		out, _ := json.Marshal(map[string]any{"tool": "bound-ingest-atts", "ok": false, "error": err.Error()})
		fmt.Println(string(out))
		os.Exit(1)
	}
	idx, err := c.spool(src, *dir, *par)
	if err != nil {
		fail(fmt.Errorf("spool: %w", err))
	}
	resp, err := c.do("PUT", tgt, nil, "", "application/json", 201, 202)
	if err != nil {
		fail(err)
	}
	resp.Body.Close()
	start := time.Now()
	n, err := c.ingest(tgt, idx, *par)
	if err != nil {
		fail(err)
	}
	ms := float64(time.Since(start).Microseconds()) / 1000
	out, _ := json.Marshal(map[string]any{"tool": "bound-ingest-atts", "ok": true, "ms": ms, "docs": len(idx.Docs), "bytes": n})
	fmt.Println(string(out))
}
