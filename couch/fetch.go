package couch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sofadb/sofa/internal/jsonx"
	"github.com/sofadb/sofa/replicate"
)

// ReportsPossibleAncestors says whether the server's `_revs_diff` names,
// per document, its leaves below a missing revision (possible_ancestors):
// CouchDB does, PouchDB Server does not.
func (d *DB) ReportsPossibleAncestors() bool { return d.srv.Vendor == VendorCouchDB }

// RevsDiff posts `_revs_diff`. A refusal of the whole request for one of
// its documents (Error.DocRefusal: CouchDB's 400 illegal_docid on a
// partitioned database) wraps replicate.ErrBatchRejected.
func (d *DB) RevsDiff(ctx context.Context, revs map[string][]string) (map[string]replicate.Missing, error) {
	revs = d.withoutServerOwnedRevs(revs)
	body, err := json.Marshal(revs)
	if err != nil {
		return nil, err
	}
	resp, err := d.srv.do(ctx, &request{Method: "POST", Path: d.path + "/_revs_diff", Body: body, ContentType: "application/json"})
	if err != nil {
		var e *Error
		if asError(err, &e) {
			if _, _, ok := e.DocRefusal(); ok {
				return nil, docRefusedErr{d.fail("_revs_diff", err)}
			}
			if e.Status == 413 {
				// Too large for the server's max_http_request_size (or
				// a proxy's limit): halves fit, and a document whose
				// revisions alone do not is reported, not fatal.
				return nil, tooLargeErr{docRefusedErr{d.fail("_revs_diff", err)}, e}
			}
		}
		return nil, d.fail("_revs_diff", err)
	}
	defer resp.Body.Close()
	out, err := ParseRevsDiff(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: _revs_diff: %w", d, err)
	}
	return out, nil
}

// docRefusedErr is a request refused for one of its documents
// (Error.DocRefusal): it is replicate.ErrBatchRejected, worded as the
// error it wraps.
type docRefusedErr struct{ err error }

func (e docRefusedErr) Error() string        { return e.err.Error() }
func (e docRefusedErr) Unwrap() error        { return e.err }
func (e docRefusedErr) Is(target error) bool { return target == replicate.ErrBatchRejected }

// tooLargeErr is a request refused for its size (413): a DocRefusal, so
// that the engine splits it until the documents fit, and reports one
// that does not fit alone as too_large.
type tooLargeErr struct {
	docRefusedErr
	e *Error
}

func (t tooLargeErr) DocRefusal() (name, reason string, ok bool) {
	return "too_large", cmp.Or(t.e.Reason, "the request is larger than the server accepts (HTTP 413)"), true
}

// FetchRevs reads revisions with `_bulk_get?revs=true&latest=true` without
// attachment bytes (stubs carry lengths and digests), falling back to
// `GET /db/doc?open_revs=[...]` when `_bulk_get` is missing or fails.
//
// Revisions CouchDB answers with a per-revision all_dbs_active error (a
// shard it could not open just now, at max_dbs_open) are asked for again
// after a throttle wait, as a 429 would be, and the limiter is told of the
// overload: they are never reported unreadable while the wait budget
// (Options.Max429Wait) lasts.
func (d *DB) FetchRevs(ctx context.Context, reqs []replicate.RevRequest) ([]*replicate.Doc, []replicate.DocError, error) {
	docs, errs, err := d.fetchRevs(ctx, reqs)
	var waited time.Duration
	for attempt := 1; err == nil; attempt++ {
		var busy []replicate.RevRequest
		kept := errs[:0:0]
		for _, e := range errs {
			if dbsActiveRow(e) {
				busy = append(busy, replicate.RevRequest{ID: e.ID, Rev: e.Rev, AttsSince: attsSinceOf(reqs, e.ID)})
			} else {
				kept = append(kept, e)
			}
		}
		if len(busy) == 0 {
			break
		}
		if werr := d.srv.busyWait(ctx, attempt, &waited); werr != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			break // the budget is spent: the rows stay errors
		}
		more, moreErrs, ferr := d.fetchRevs(ctx, busy)
		if ferr != nil {
			return nil, nil, ferr
		}
		docs = append(docs, more...)
		errs = append(kept, moreErrs...)
	}
	return docs, errs, err
}

// dbsActiveRow: a per-revision error of CouchDB at max_dbs_open
// ({"error":"internal_fabric_error","reason":"all_dbs_active"}).
func dbsActiveRow(e replicate.DocError) bool {
	return strings.Contains(e.Error, "all_dbs_active") || strings.Contains(e.Reason, "all_dbs_active")
}

func attsSinceOf(reqs []replicate.RevRequest, id string) []string {
	for _, r := range reqs {
		if r.ID == id {
			return r.AttsSince
		}
	}
	return nil
}

func (d *DB) fetchRevs(ctx context.Context, reqs []replicate.RevRequest) ([]*replicate.Doc, []replicate.DocError, error) {
	if !d.bulkGetOff {
		docs, errs, err := d.bulkGet(ctx, reqs)
		if err == nil {
			return docs, errs, nil
		}
		st := StatusOf(err)
		if st == 413 {
			return d.fetchHalves(ctx, reqs)
		}
		if st != 400 && st != 404 && st != 405 && st != 415 && st != 501 {
			return nil, nil, err
		}
		if st == 404 && d.gone(ctx, err) {
			return nil, nil, d.goneErr("_bulk_get")
		}
		d.bulkGetOff = true
		if d.srv.opts.Log != nil {
			d.srv.opts.Log("%s: _bulk_get unavailable (%v); using open_revs GETs", d, err)
		}
	}
	return d.openRevs(ctx, reqs)
}

// fetchHalves reads reqs, whose `_bulk_get` the server refused as too
// large (413, its max_http_request_size), in two halves, each split again
// while refused; a single revision is read with a GET, which has no body.
func (d *DB) fetchHalves(ctx context.Context, reqs []replicate.RevRequest) ([]*replicate.Doc, []replicate.DocError, error) {
	if len(reqs) == 1 {
		return d.openRevs(ctx, reqs)
	}
	h := len(reqs) / 2
	docs, errs, err := d.fetchRevs(ctx, reqs[:h])
	if err != nil {
		return nil, nil, err
	}
	docs2, errs2, err := d.fetchRevs(ctx, reqs[h:])
	if err != nil {
		return nil, nil, err
	}
	return append(docs, docs2...), append(errs, errs2...), nil
}

func (d *DB) bulkGet(ctx context.Context, reqs []replicate.RevRequest) ([]*replicate.Doc, []replicate.DocError, error) {
	body := make([]byte, 0, 64*len(reqs))
	body = append(body, `{"docs":[`...)
	for i, r := range reqs {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"id":`...)
		body = jsonx.Quote(body, r.ID)
		body = append(body, `,"rev":`...)
		body = jsonx.Quote(body, r.Rev)
		body = append(body, '}')
	}
	body = append(body, `]}`...)
	resp, err := d.srv.do(ctx, &request{Method: "POST", Path: d.path + "/_bulk_get",
		Query: d.bulkGetQuery(), Body: body, ContentType: "application/json"})
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	docs, errs, err := ParseBulkGet(resp.Body, reqs)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: _bulk_get: %w", d, err)
	}
	return docs, errs, nil
}

// bulkGetQuery asks for `_revisions`, stubs with encoding info and, on
// CouchDB, the latest leaf of a revision updated meanwhile. PouchDB Server
// is never sent latest=true: asking it for a revision that no longer
// exists with latest=true crashes the server process.
func (d *DB) bulkGetQuery() string {
	if d.srv.Vendor == VendorPouchDB {
		return "revs=true&attachments=false"
	}
	return "revs=true&latest=true&attachments=false&att_encoding_info=true"
}

// openRevs fetches revisions one document at a time with open_revs,
// grouping revisions of one document and keeping each URL under 7000
// bytes.
func (d *DB) openRevs(ctx context.Context, reqs []replicate.RevRequest) ([]*replicate.Doc, []replicate.DocError, error) {
	byID := map[string][]string{}
	var order []string
	for _, r := range reqs {
		if _, ok := byID[r.ID]; !ok {
			order = append(order, r.ID)
		}
		byID[r.ID] = append(byID[r.ID], r.Rev)
	}
	var docs []*replicate.Doc
	var errs []replicate.DocError
	for _, id := range order {
		revs := byID[id]
		maxN := len(revs) // lowered when the server answers 414
		for len(revs) > 0 {
			n := min(len(revs), maxN)
			for n > 1 && openRevsLen(revs[:n]) > 6000 {
				n /= 2
			}
			chunk := revs[:n]
			revs = revs[n:]
			rj, _ := json.Marshal(chunk)
			q := "revs=true&latest=true&open_revs=" + url.QueryEscape(string(rj))
			resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.path + "/" + EscapeDocID(id), Query: q, Accept: "multipart/mixed, application/json"})
			if err != nil {
				st := StatusOf(err)
				if st == 414 && len(chunk) > 1 {
					// URL too long for this server: ask for fewer
					// revisions at a time.
					maxN = len(chunk) / 2
					revs = chunk[:len(chunk)+len(revs)] // chunk and revs are adjacent
					continue
				}
				if dbMissing(err) {
					return nil, nil, d.goneErr("open_revs")
				}
				if st == 404 || st == 414 || st == 400 {
					for _, rev := range chunk {
						errs = append(errs, replicate.DocError{ID: id, Rev: rev, Error: "read_failed", Reason: err.Error()})
					}
					continue
				}
				return nil, nil, d.fail("open_revs", err)
			}
			ds, es, err := ParseOpenRevs(resp.Body, resp.Header.Get("Content-Type"), id)
			resp.Body.Close()
			if err != nil {
				return nil, nil, fmt.Errorf("%s: open_revs of %q: %w", d, shortID(id), err)
			}
			for i := range es {
				if es[i].ID == "" {
					es[i].ID = id
				}
			}
			docs = append(docs, ds...)
			errs = append(errs, es...)
		}
	}
	return docs, errs, nil
}

func openRevsLen(revs []string) int {
	n := 20
	for _, r := range revs {
		n += len(r) + 10
	}
	return n
}

func shortID(id string) string {
	if len(id) > 80 {
		return id[:60] + "...(" + strconv.Itoa(len(id)) + " bytes)"
	}
	return id
}

// gone reports whether err, a 404 answer to a read of this database,
// means the database itself is missing (deleted during the copy) rather
// than one document or an endpoint the server lacks: CouchDB says so in
// its reason ("Database does not exist."); for any other 404 the
// database is asked for (GET /db).
func (d *DB) gone(ctx context.Context, err error) bool {
	if StatusOf(err) != 404 {
		return false
	}
	if dbMissing(err) {
		return true
	}
	_, ierr := d.Info(ctx)
	return errors.Is(ierr, replicate.ErrNotFound)
}

// dbMissing reports whether err is CouchDB's 404 for a database that does
// not exist (reason "Database does not exist.").
func dbMissing(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == 404 && strings.Contains(e.Reason, "Database does not exist")
}

// goneErr is the error of a read (op) of a database deleted meanwhile:
// the database fails as one, never as one read_failed per document.
func (d *DB) goneErr(op string) error {
	return fmt.Errorf("%s: %s: %w (HTTP 404: the database was deleted while it was read)", d, op, replicate.ErrNotFound)
}

// WinsAsCouchDB says whether the server picks a document's winning
// revision as CouchDB does: among leaves of one generation and deleted
// state, the greatest revision id, one of 32 hex digits compared as the
// bytes it spells. PouchDB Server compares revision ids as strings.
func (d *DB) WinsAsCouchDB() bool { return d.srv.Vendor != VendorPouchDB }
