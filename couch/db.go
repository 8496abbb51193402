package couch

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sofadb/sofa/internal/jsonx"
	"github.com/sofadb/sofa/replicate"
)

// DefaultChangesPage is the `_changes` page size (rows per request).
const DefaultChangesPage = 2000

// DB is one database on a Server. It implements replicate.Source and
// replicate.Target.
type DB struct {
	srv  *Server
	name string
	path string // "/" + escaped name
	// readOnly and fresh are set at open time (DBOptions).
	readOnly, fresh bool
	// InlineMax is the largest total of identity-encoded attachment bytes
	// of one revision that is inlined as base64 in `_bulk_docs`; larger or
	// gzip-encoded attachments go as multipart/related PUT. Zero: 64 KiB
	// on CouchDB; PouchDB Server always inlines (it takes no multipart).
	InlineMax int64
	// ChangesPage is the number of rows asked per `_changes` request
	// (`limit`): pages let writes start before a large feed is computed
	// whole. Zero: DefaultChangesPage; negative: one unpaged request.
	ChangesPage int
	// Multipart writes every revision that carries attachment bytes as a
	// multipart/related PUT, whatever the server (CouchDB's replicator
	// path; PouchDB Server takes it too for identity-encoded bytes).
	Multipart   bool
	mu          sync.Mutex
	partitioned bool // props.partitioned from the last Info
	infoRead    bool
	localRevs   map[string]string // _local id (no prefix) -> _rev last written
	// BulkGetUnsupported is set once `_bulk_get` failed; reads then use
	// `open_revs` GETs.
	bulkGetOff bool
	// notAdmin: setting a property was refused for lack of rights.
	notAdmin atomic.Bool
	// pending is the `pending` of the last changes page read, plus one
	// (zero: not known).
	pending atomic.Int64
}

var (
	_ replicate.Source = (*DB)(nil)
	_ replicate.Target = (*DB)(nil)
)

// Name is the decoded database name.
func (d *DB) Name() string { return d.name }

// ReadOnly reports whether the handle refuses `_local` writes without a
// request (DBOptions.ReadOnly).
func (d *DB) ReadOnly() bool { return d.readOnly }

// Fresh reports whether the handle is of a database this process has just
// created (DBOptions.Fresh; see Created).
func (d *DB) Fresh() bool { return d.fresh }

// Server is the server holding the database.
func (d *DB) Server() *Server { return d.srv }

func (d *DB) String() string { return d.srv.URL() + d.path }

func (d *DB) fail(op string, err error) error {
	switch StatusOf(err) {
	case 401:
		return fmt.Errorf("%s: %s: %s", d, op, d.srv.unauthorized(err))
	case 403:
		return fmt.Errorf("%s: %s: forbidden (HTTP 403): %w", d, op, err)
	case 404:
		return fmt.Errorf("%s: %s: %w (HTTP 404)", d, op, replicate.ErrNotFound)
	case 0:
		if errors.Is(err, context.Canceled) {
			return err
		}
		return fmt.Errorf("%s: %s: %w", d, op, err)
	}
	return fmt.Errorf("%s: %s: %w", d, op, err)
}

// Identity names the database for replication ids: the server's uuid
// (or its URL without credentials when it has none) and the db name.
func (d *DB) Identity() string {
	id := d.srv.UUID
	if id == "" {
		id = d.srv.URL()
	}
	return id + "/" + d.name
}

// Created describes a database this client has just created: empty, so
// a replication into it needs neither its info nor its checkpoints.
func (d *DB) Created() *replicate.DBInfo {
	return &replicate.DBInfo{Name: d.name, Identity: d.Identity()}
}

// Info reads `GET /db`.
func (d *DB) Info(ctx context.Context) (replicate.DBInfo, error) {
	resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.path})
	if err != nil {
		return replicate.DBInfo{}, d.fail("open database", err)
	}
	defer resp.Body.Close()
	var info dbInfoJSON
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || info.DBName == "" {
		return replicate.DBInfo{}, fmt.Errorf("%s: not a CouchDB database (GET answered without db_name)", d)
	}
	return d.useInfo(ctx, &info)
}

// dbInfoJSON is the part of a database's info (`GET /db`, or one row of
// `_dbs_info`) that sofa reads.
type dbInfoJSON struct {
	DBName        string          `json:"db_name"`
	DocCount      int64           `json:"doc_count"`
	DocDelCount   *int64          `json:"doc_del_count"` // PouchDB Server has none
	UpdateSeq     json.RawMessage `json:"update_seq"`
	InstanceStart json.RawMessage `json:"instance_start_time"`
	Props         struct {
		Partitioned bool `json:"partitioned"`
	} `json:"props"`
	Sizes struct {
		External int64 `json:"external"`
	} `json:"sizes"`
}

// useInfo records what d learns from its info and returns it as a
// replicate.DBInfo (without the server's own document of a system
// database in its count).
func (d *DB) useInfo(ctx context.Context, info *dbInfoJSON) (replicate.DBInfo, error) {
	ist := string(info.InstanceStart)
	if len(ist) >= 2 && ist[0] == '"' {
		ist = jsonx.Unquote(info.InstanceStart)
	}
	id := d.Identity()
	d.mu.Lock()
	d.partitioned, d.infoRead = info.Props.Partitioned, true
	d.mu.Unlock()
	out := replicate.DBInfo{
		Name: info.DBName, DocCount: info.DocCount, DelCountUnknown: info.DocDelCount == nil,
		UpdateSeq: replicate.Seq(info.UpdateSeq), InstanceStart: ist,
		Partitioned: info.Props.Partitioned, Identity: id, Bytes: info.Sizes.External,
	}
	if info.DocDelCount != nil {
		out.DelCount = *info.DocDelCount
	}
	// The server's own document of a system database is not the user's:
	// it is never copied, so it is not counted either.
	if own, err := d.ownedLive(ctx); err != nil {
		return replicate.DBInfo{}, err
	} else if own && out.DocCount > 0 {
		out.DocCount--
	}
	return out, nil
}

// GetLocal reads `_local/<id>`.
func (d *DB) GetLocal(ctx context.Context, id string) ([]byte, error) {
	resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.localDocPath(id)})
	if err != nil {
		if StatusOf(err) == 404 {
			return nil, replicate.ErrNotFound
		}
		return nil, d.fail("read checkpoint", err)
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

func (d *DB) localDocPath(id string) string {
	return d.path + "/" + EscapeDocID("_local/"+strings.TrimPrefix(id, "_local/"))
}

// PutLocal writes `_local/<id>`. 401/403 give replicate.ErrReadOnly.
func (d *DB) PutLocal(ctx context.Context, id string, body []byte) error {
	if d.readOnly {
		return replicate.ErrReadOnly
	}
	resp, err := d.srv.do(ctx, &request{Method: "PUT", Path: d.localDocPath(id), Body: body, ContentType: "application/json"})
	if err != nil {
		if st := StatusOf(err); st == 401 || st == 403 {
			return fmt.Errorf("%w: %w", replicate.ErrReadOnly, err)
		}
		return d.fail("write checkpoint", err)
	}
	defer resp.Body.Close()
	var ok struct {
		Rev string `json:"rev"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&ok) == nil && ok.Rev != "" {
		d.mu.Lock()
		if d.localRevs == nil {
			d.localRevs = map[string]string{}
		}
		d.localRevs[strings.TrimPrefix(id, "_local/")] = ok.Rev
		d.mu.Unlock()
	}
	return nil
}

// LocalRev is the `_rev` the last successful PutLocal of id gave it.
func (d *DB) LocalRev(id string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	rev, ok := d.localRevs[strings.TrimPrefix(id, "_local/")]
	return rev, ok
}

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
		page := d.ChangesPage
		if page == 0 {
			page = d.srv.opts.ChangesPage
		}
		if page == 0 {
			page = DefaultChangesPage
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
		err = sleepCtx(ctx, wait)
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

// ReportsPossibleAncestors says whether the server's `_revs_diff` names,
// per document, its leaves below a missing revision (possible_ancestors):
// CouchDB does, PouchDB Server does not.
func (d *DB) ReportsPossibleAncestors() bool { return d.srv.Vendor == VendorCouchDB }

// RevsDiff posts `_revs_diff`.
func (d *DB) RevsDiff(ctx context.Context, revs map[string][]string) (map[string]replicate.Missing, error) {
	revs = d.withoutServerOwnedRevs(revs)
	body, err := json.Marshal(revs)
	if err != nil {
		return nil, err
	}
	resp, err := d.srv.do(ctx, &request{Method: "POST", Path: d.path + "/_revs_diff", Body: body, ContentType: "application/json"})
	if err != nil {
		return nil, d.fail("_revs_diff", err)
	}
	defer resp.Body.Close()
	out, err := ParseRevsDiff(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: _revs_diff: %w", d, err)
	}
	return out, nil
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
		if st != 400 && st != 404 && st != 405 && st != 415 && st != 501 {
			return nil, nil, err
		}
		d.bulkGetOff = true
		if d.srv.opts.Log != nil {
			d.srv.opts.Log("%s: _bulk_get unavailable (%v); using open_revs GETs", d, err)
		}
	}
	return d.openRevs(ctx, reqs)
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

// Attachment reads one attachment's stored bytes with
// `GET /db/doc/att?rev=R` and `Accept-Encoding: gzip`, so a gzip-stored
// attachment arrives as stored. The bytes are checked against att.Digest
// when it is an md5 digest.
func (d *DB) Attachment(ctx context.Context, docID, rev string, att *replicate.Attachment) error {
	// CouchDB sends a gzip-stored attachment as stored when the client
	// accepts gzip; PouchDB Server stores identity bytes and would only
	// compress on the wire, so it is asked for identity.
	h := map[string][]string{"Accept-Encoding": {"gzip"}}
	if d.srv.Vendor == VendorPouchDB {
		h["Accept-Encoding"] = []string{"identity"}
	}
	p := d.path + "/" + EscapeDocID(docID) + "/" + EscapeAttName(att.Name)
	if len(p) > maxURLPath {
		// Too long for a URL (PouchDB Server refuses over 16 KB): read the
		// revision with its attachments inline, the id in a POST body.
		return d.attachmentInline(ctx, docID, rev, att)
	}
	resp, err := d.srv.do(ctx, &request{Method: "GET", Path: p, Query: "rev=" + url.QueryEscape(rev), Accept: "*/*", Header: h})
	if err != nil {
		if st := StatusOf(err); st == 404 || st == 400 || st == 414 {
			return fmt.Errorf("%w: attachment %q of %q rev %s: %w", replicate.ErrUnreadable, att.Name, shortID(docID), rev, err)
		}
		return d.fail("read attachment "+att.Name+" of "+shortID(docID), err)
	}
	defer resp.Body.Close()
	limit := att.StoredLength() + 1<<20
	buf := bytes.NewBuffer(make([]byte, 0, att.StoredLength()+512))
	_, err = buf.ReadFrom(io.LimitReader(resp.Body, limit+1))
	data := buf.Bytes()
	if err != nil {
		return d.fail("read attachment "+att.Name+" of "+shortID(docID), &NetError{Op: "GET attachment", Err: err})
	}
	data, enc, err := storedBytes(data, resp.Header.Get("Content-Encoding"), att)
	if err != nil {
		return fmt.Errorf("%s: attachment %q of %q rev %s: %w", d, att.Name, shortID(docID), rev, err)
	}
	att.Encoding = enc
	if enc != "" {
		att.EncodedLength = int64(len(data))
	}
	att.Data = data
	return nil
}

// attachmentInline reads one attachment through `_bulk_get` with
// attachments=true (base64 in JSON): for documents whose URL is too long.
func (d *DB) attachmentInline(ctx context.Context, docID, rev string, att *replicate.Attachment) error {
	body := []byte(`{"docs":[{"id":`)
	body = jsonx.Quote(body, docID)
	body = append(body, `,"rev":`...)
	body = jsonx.Quote(body, rev)
	body = append(body, `}]}`...)
	resp, err := d.srv.do(ctx, &request{Method: "POST", Path: d.path + "/_bulk_get", Query: "revs=true&attachments=true",
		Body: body, ContentType: "application/json"})
	if err != nil {
		if st := StatusOf(err); st == 404 || st == 400 || st == 405 || st == 413 {
			return fmt.Errorf("%w: attachment %q of %q rev %s: the id is too long for a URL and _bulk_get failed: %w", replicate.ErrUnreadable, att.Name, shortID(docID), rev, err)
		}
		return d.fail("read attachment "+att.Name+" of "+shortID(docID), err)
	}
	defer resp.Body.Close()
	docs, _, err := ParseBulkGet(resp.Body, []replicate.RevRequest{{ID: docID, Rev: rev}})
	if err != nil {
		return fmt.Errorf("%s: _bulk_get: %w", d, err)
	}
	for _, doc := range docs {
		if doc.Rev != rev {
			continue
		}
		for _, a := range doc.Atts {
			if a.Name == att.Name && a.Data != nil {
				data, enc, err := storedBytes(a.Data, "", att)
				if err != nil {
					return fmt.Errorf("%s: attachment %q of %q rev %s: %w", d, att.Name, shortID(docID), rev, err)
				}
				att.Data, att.Encoding = data, enc
				return nil
			}
		}
	}
	return fmt.Errorf("%w: attachment %q of %q rev %s: not in the _bulk_get answer", replicate.ErrUnreadable, att.Name, shortID(docID), rev)
}

// readRevsLimit asks for `_revs_limit`. PouchDB Server has no such route:
// its first 404 is remembered and the route never asked again; databases
// read at once wait for that first answer instead of each asking.
func (d *DB) readRevsLimit(ctx context.Context) (*http.Response, error) {
	if d.srv.Vendor == VendorPouchDB {
		d.srv.revsLimitMu.Lock()
		defer d.srv.revsLimitMu.Unlock()
	}
	if d.srv.noRevsLimit.Load() {
		return nil, &Error{Status: 404}
	}
	resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.path + "/_revs_limit"})
	if StatusOf(err) == 404 && d.srv.Vendor == VendorPouchDB {
		d.srv.noRevsLimit.Store(true)
	}
	return resp, err
}

// Metadata reads `_security`, `_revs_limit` and props.
func (d *DB) Metadata(ctx context.Context) (replicate.Metadata, error) {
	var m replicate.Metadata
	resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.path + "/_security"})
	if err == nil {
		m.Security, _ = io.ReadAll(resp.Body)
		m.Security = bytes.TrimSpace(m.Security)
		resp.Body.Close()
	} else if st := StatusOf(err); st != 404 && st != 403 && st != 401 {
		return m, d.fail("read _security", err)
	}
	resp, err = d.readRevsLimit(ctx)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m.RevsLimit, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	} else if st := StatusOf(err); st != 404 && st != 400 && st != 405 {
		return m, d.fail("read _revs_limit", err)
	}
	d.mu.Lock()
	read, part := d.infoRead, d.partitioned
	d.mu.Unlock()
	if !read {
		info, err := d.Info(ctx)
		if err != nil {
			return m, err
		}
		part = info.Partitioned
	}
	m.Partitioned = part
	return m, nil
}

// SetMetadata writes `_revs_limit` (BeforeDocs; 404 tolerated) or
// `_security` (AfterDocs).
func (d *DB) SetMetadata(ctx context.Context, m replicate.Metadata, phase replicate.MetadataPhase) error {
	switch phase {
	case replicate.BeforeDocs:
		// A database this client has just created has CouchDB's fixed
		// default (1000): setting it again would cost a request per
		// database for nothing.
		if m.RevsLimit > 0 && !(d.fresh && m.RevsLimit == defaultRevsLimit) {
			resp, err := d.srv.do(ctx, &request{Method: "PUT", Path: d.path + "/_revs_limit", Body: []byte(strconv.Itoa(m.RevsLimit)), ContentType: "application/json"})
			if err != nil {
				if st := StatusOf(err); st == 404 || st == 405 || st == 400 {
					return nil // PouchDB Server has no _revs_limit route
				}
				if Denied(err) {
					d.notAdmin.Store(true)
					return fmt.Errorf("%s: _revs_limit not set to %d: %w: the account is not an admin of the database (%w)", d, m.RevsLimit, replicate.ErrMetadataRefused, err)
				}
				return d.fail("set _revs_limit", err)
			}
			resp.Body.Close()
		}
	case replicate.AfterDocs:
		if len(m.Security) > 0 && d.name == UsersDB {
			return d.setUsersSecurity(ctx, m.Security)
		}
		if len(m.Security) > 0 {
			if d.fresh && d.holdsDefaultSecurity(ctx, m.Security) {
				return nil // what a PUT would write is already there
			}
			if d.notAdmin.Load() {
				// CouchDB 3 answers a member's PUT with 500 no_majority,
				// which would be retried: the _revs_limit refusal said it.
				return fmt.Errorf("%s: _security not set: %w: the account is not an admin of the database", d, replicate.ErrMetadataRefused)
			}
			resp, err := d.srv.do(ctx, &request{Method: "PUT", Path: d.path + "/_security", Body: m.Security, ContentType: "application/json"})
			if Denied(err) {
				return fmt.Errorf("%s: _security not set: %w: the account is not an admin of the database (%w)", d, replicate.ErrMetadataRefused, err)
			}
			if err != nil {
				return d.fail("set _security", err)
			}
			resp.Body.Close()
		}
	}
	return nil
}

// defaultRevsLimit is the `_revs_limit` of a new CouchDB database (not
// configurable).
const defaultRevsLimit = 1000

// holdsDefaultSecurity reports whether sec equals the `_security` a new
// database on this server starts with, which a database this client has
// just created (Fresh) still holds. The default is read once per server,
// from the first such database; a failed read answers false (the caller
// then writes sec).
func (d *DB) holdsDefaultSecurity(ctx context.Context, sec []byte) bool {
	var want any
	if json.Unmarshal(sec, &want) != nil {
		return false
	}
	def := d.srv.freshSecurity.Load()
	if def == nil {
		d.srv.freshSecMu.Lock() // databases finishing together ask once
		defer d.srv.freshSecMu.Unlock()
		def = d.srv.freshSecurity.Load()
	}
	if def == nil {
		resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.path + "/_security"})
		if err != nil {
			return false
		}
		var got any
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil {
			return false
		}
		d.srv.freshSecurity.Store(&got)
		def = &got
	}
	return reflect.DeepEqual(*def, want)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// storedBytes decides what bytes an attachment answer carried. CouchDB
// sends a gzip-stored attachment as stored with Content-Encoding: gzip
// (its digest is the md5 of those bytes); PouchDB Server may gzip on the
// wire (the digest is the md5 of the decoded bytes). The digest tells
// which; without an md5 digest, a gzip answer is kept as stored only when
// the stub said so.
func storedBytes(data []byte, contentEncoding string, att *replicate.Attachment) ([]byte, string, error) {
	md5ok := func(b []byte) bool {
		if !strings.HasPrefix(att.Digest, "md5-") {
			return true
		}
		sum := md5.Sum(b)
		return base64.StdEncoding.EncodeToString(sum[:]) == att.Digest[4:]
	}
	if contentEncoding == "gzip" {
		if strings.HasPrefix(att.Digest, "md5-") && md5ok(data) || !strings.HasPrefix(att.Digest, "md5-") && att.Encoding == "gzip" {
			return data, "gzip", nil
		}
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, "", fmt.Errorf("bad gzip answer: %w", err)
		}
		plain, err := io.ReadAll(io.LimitReader(zr, att.Length+1<<20))
		if err != nil {
			return nil, "", fmt.Errorf("bad gzip answer: %w", err)
		}
		data = plain
	}
	if att.Encoding == "gzip" {
		// Asked for stored gzip bytes, got identity ones: the target
		// recomputes encoding and digest.
		att.Digest = ""
		return data, "", nil
	}
	if !md5ok(data) {
		return nil, "", fmt.Errorf("bytes do not match digest %s", att.Digest)
	}
	return data, "", nil
}
