package couch

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	ctxwait "github.com/sofadb/sofa/internal/wait"
	"github.com/sofadb/sofa/replicate"
)

// Changes streams `_changes?style=all_docs&feed=normal` from since, resuming
// from the last row delivered when the stream breaks.
func (d *DB) Changes(ctx context.Context, since replicate.Seq, fn func(replicate.Change) error) error {
	return d.changes(ctx, since, "", fn)
}

// ChangesWithDocs is Changes with `include_docs=true`: a row whose only
// leaf is a live generation-1 revision carries that revision in
// Change.Docs (its history is its own hash), so it needs no `_bulk_get`.
// For an initial copy this halves the requests to the source; the engine
// asks for it only when the target lacks everything.
//
// On CouchDB the rows' attachment stubs must carry att_encoding_info: a
// compressible attachment is stored gzip-encoded and its digest is the
// md5 of the stored bytes, so without "encoding" the identity bytes read
// later would not match the digest.
func (d *DB) ChangesWithDocs(ctx context.Context, since replicate.Seq, fn func(replicate.Change) error) error {
	extra := "&include_docs=true"
	if d.srv.Vendor != VendorPouchDB {
		extra += "&att_encoding_info=true"
	}
	return d.changes(ctx, since, extra, fn)
}

func (d *DB) changes(ctx context.Context, since replicate.Seq, extra string, fn func(replicate.Change) error) error {
	fn = d.skipServerOwned(fn)
	last := since
	failures := 0
	progress := time.Now()
	for {
		page := d.changesPage
		if page == 0 {
			page = d.srv.opts.ChangesPage
		}
		if page == 0 {
			page = d.srv.Caps().ChangesPage
		}
		q := "style=all_docs&feed=normal" + extra + "&since=" + url.QueryEscape(last.String())
		// seq_interval: CouchDB computes a clustered seq only every so
		// many rows (the others come as null), which spares the source
		// work, as CouchDB's replicator asks. Rows after the last seq of
		// a page are held back until the page ends, and the last of them
		// gets the page's last_seq: every page then ends on a seq, so a
		// checkpoint never lags the feed, and a broken page is read again
		// from the last seq delivered.
		interval := page > 0 && d.srv.Vendor == VendorCouchDB && !strings.Contains(extra, "include_docs")
		if page > 0 {
			q += "&limit=" + strconv.Itoa(page)
		}
		if interval {
			q += "&seq_interval=" + strconv.Itoa(seqInterval(page))
		}
		resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.path + "/_changes", Query: q, Stream: true})
		if err != nil {
			return d.fail("read changes", err)
		}
		delivered := 0
		var held []replicate.Change
		deliver := func(c replicate.Change) error {
			if err := fn(c); err != nil {
				return err
			}
			delivered++
			if len(c.Seq) > 0 {
				last = append(replicate.Seq(nil), c.Seq...)
			}
			return nil
		}
		var cbErr error
		end, perr := ParseChanges(resp.Body, func(c replicate.Change) error {
			if interval && len(c.Seq) == 0 {
				held = append(held, c)
				return nil
			}
			for _, h := range held {
				if cbErr = deliver(h); cbErr != nil {
					return cbErr
				}
			}
			held = held[:0]
			cbErr = deliver(c)
			return cbErr
		})
		resp.Body.Close()
		if cbErr == nil && perr == nil && len(held) > 0 {
			held[len(held)-1].Seq = end.LastSeq
			for _, h := range held {
				if cbErr = deliver(h); cbErr != nil {
					break
				}
			}
		}
		if cbErr != nil {
			return cbErr
		}
		if perr == nil {
			d.pending.Store(end.Pending + 1)
			if page <= 0 || end.Rows < page {
				return nil // the last page
			}
			if len(end.LastSeq) > 0 {
				last = end.LastSeq
			}
			failures = 0
			progress = time.Now()
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if malformed(perr) {
			// The server sent JSON we cannot read: asking again gets the
			// same bytes. Not transient.
			return fmt.Errorf("%s: read changes after seq %s: malformed answer: %w", d, last.String(), perr)
		}
		if delivered > 0 {
			failures = 0
			progress = time.Now()
		} else {
			failures++
		}
		// Give up after 8 broken reads in a row without a row, or when
		// no row arrived within the retry budget.
		wait := backoff(failures+1, 250e6, 10e9)
		if failures > 8 || d.srv.opts.RetryTime < 0 || time.Since(progress)+wait > d.srv.opts.RetryTime {
			return d.fail("read changes", fmt.Errorf("the feed broke %d times without progress, last: %w", failures, perr))
		}
		d.srv.Stats.Retries.Add(1)
		d.srv.Stats.WaitNanos.Add(int64(wait))
		if d.srv.opts.Log != nil {
			d.srv.opts.Log("changes feed of %s broke after %d rows (%v); resuming from seq %s", d.name, delivered, perr, last.String())
		}
		d.srv.Stats.Backoff.Add(1)
		err = ctxwait.Sleep(ctx, wait)
		d.srv.Stats.Backoff.Add(-1)
		if err != nil {
			return err
		}
	}
}

// seqInterval is the seq_interval asked with a page of n rows: a seq
// every 100 rows at most, so that a checkpoint taken inside a long page is
// never far behind.
func seqInterval(n int) int {
	return max(1, min(n, 100))
}
