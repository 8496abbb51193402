package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/sofadb/sofa/internal/couchtest"
)

// oracle checks a copy (untimed) with internal/couchtest.CompareDBs, the
// test suite's independent oracle: the same ids, leaves, winners and
// deleted states, and per leaf the same body, _revisions and attachments
// (bytes included). a and b are two databases, or two servers when whole
// is set (then the same user databases on both, each compared).
// tgtPouch: b is a PouchDB Server (which resets attachment revpos on
// write, see CompareOptions.PouchDBRevpos). It returns "equal" or a short
// account of what differs.
func (e *env) oracle(ctx context.Context, a, b string, whole, tgtPouch bool) string {
	opts := couchtest.CompareOptions{PouchDBRevpos: tgtPouch, MaxItems: 3, BatchSize: 200}
	if !whole {
		opts.BatchSize = oracleBatch(ctx, a)
		d, err := couchtest.CompareDBs(ctx, a, b, opts)
		if err != nil {
			return "oracle: " + redactErr(err, a, b)
		}
		if d.Equal() {
			return "equal"
		}
		return "DIFFERENT: " + firstLines(d.String(), 4)
	}
	srcDBs, err := userDBs(ctx, a)
	if err != nil {
		return "oracle: source: " + redactErr(err, a, b)
	}
	tgtDBs, err := userDBs(ctx, b)
	if err != nil {
		return "oracle: target: " + redactErr(err, a, b)
	}
	slices.Sort(srcDBs)
	slices.Sort(tgtDBs)
	var problems []string
	if !slices.Equal(srcDBs, tgtDBs) {
		problems = append(problems, fmt.Sprintf("databases differ: %d on the source, %d on the target", len(srcDBs), len(tgtDBs)))
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	differ := 0
	for _, db := range srcDBs {
		if !slices.Contains(tgtDBs, db) {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			o := opts
			o.BatchSize = oracleBatch(ctx, dbURL(a, db))
			d, err := couchtest.CompareDBs(ctx, dbURL(a, db), dbURL(b, db), o)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				differ++
				problems = append(problems, db+": oracle: "+redactErr(err, a, b))
			case !d.Equal():
				differ++
				problems = append(problems, db+": "+firstLines(d.String(), 2))
			}
		}()
	}
	wg.Wait()
	if len(problems) == 0 {
		return "equal"
	}
	slices.Sort(problems)
	return fmt.Sprintf("DIFFERENT (%d of %d dbs): %s", differ, len(srcDBs), strings.Join(problems[:min(3, len(problems))], "; "))
}

// redactErr is err's text with the credentials of the URLs removed.
func redactErr(err error, urls ...string) string {
	s := err.Error()
	for _, u := range urls {
		s = strings.ReplaceAll(s, u, redact(u))
	}
	return s
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[:min(n, len(lines))], " | ")
}

// oracleBatch is the number of revisions the oracle asks per _bulk_get of
// the database at dbURL: 200, fewer where the documents are large (their
// attachments come inline as base64), so that one answer stays near 64
// MiB: the atts_db preset (internal/dataset; BENCHMARKS.md, "Method")
// carries an attachment of 2 MB per document. A server without
// sizes.external (PouchDB Server) gets 200.
func oracleBatch(ctx context.Context, dbURL string) int {
	var info struct {
		DocCount int64 `json:"doc_count"`
		Sizes    struct {
			External int64 `json:"external"`
		} `json:"sizes"`
	}
	if err := getJSON(ctx, dbURL, &info); err != nil || info.DocCount == 0 || info.Sizes.External == 0 {
		return 200
	}
	per := info.Sizes.External / info.DocCount * 4 / 3 // base64
	return int(max(1, min(200, (64<<20)/max(per, 1))))
}
