package couch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/sofadb/sofa/replicate"
)

// DBsInfoMax is the most database names sofa asks `POST /_dbs_info` about
// at once: CouchDB's default [chttpd] max_db_number_for_dbs_info_req.
const DBsInfoMax = 100

// infoBatcher gathers the InfoBatched calls made on one server while an
// earlier `_dbs_info` request is in flight and asks about all of them in
// the next one: with many databases copied at once, their count checks
// cost a few requests instead of one `GET /db` each. A lone call is sent
// at once (it waits for no timer), so batching costs no latency. Servers
// without `_dbs_info` (CouchDB before 2.2, PouchDB Server) get one
// `GET /db` per call, as Info.
type infoBatcher struct {
	mu      sync.Mutex
	queue   []*infoCall
	running bool
	off     bool // the server has no _dbs_info
}

type infoCall struct {
	db   *DB
	done chan struct{}
	info replicate.DBInfo
	err  error
	// direct: the server turned out to lack _dbs_info; the caller asks
	// GET /db itself.
	direct bool
}

// InfoBatched is Info through `POST /_dbs_info`, batched with the other
// InfoBatched calls on the same server (see infoBatcher). Use it where
// many databases are checked at about the same time (whole-server
// copies); a missing database gives replicate.ErrNotFound as Info does.
func (d *DB) InfoBatched(ctx context.Context) (replicate.DBInfo, error) {
	b := &d.srv.infoB
	b.mu.Lock()
	if b.off {
		b.mu.Unlock()
		return d.Info(ctx)
	}
	c := &infoCall{db: d, done: make(chan struct{})}
	b.queue = append(b.queue, c)
	if !b.running {
		b.running = true
		// The requests are the batch's, not this caller's: a caller
		// that gives up must not fail the others.
		go b.flush(context.WithoutCancel(ctx), d.srv)
	}
	b.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		return replicate.DBInfo{}, ctx.Err()
	}
	if c.direct {
		return d.Info(ctx)
	}
	return c.info, c.err
}

// flush sends the queued calls, DBsInfoMax at a time, until none is left.
func (b *infoBatcher) flush(ctx context.Context, s *Server) {
	for {
		b.mu.Lock()
		n := min(len(b.queue), DBsInfoMax)
		if n == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		calls := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.mu.Unlock()

		unsupported := s.dbsInfo(ctx, calls)
		if unsupported {
			b.mu.Lock()
			b.off = true
			rest := b.queue
			b.queue, b.running = nil, false
			b.mu.Unlock()
			for _, c := range append(calls, rest...) {
				c.direct = true
				close(c.done)
			}
			return
		}
		for _, c := range calls {
			close(c.done)
		}
	}
}

// dbsInfo asks `POST /_dbs_info` about the calls' databases and fills in
// each call's info or error. It reports whether the server lacks the
// endpoint (the calls are then left for GET /db).
func (s *Server) dbsInfo(ctx context.Context, calls []*infoCall) (unsupported bool) {
	keys := make([]string, len(calls))
	for i, c := range calls {
		keys[i] = c.db.name
	}
	body, _ := json.Marshal(map[string][]string{"keys": keys})
	resp, err := s.do(ctx, &request{Method: "POST", Path: "/_dbs_info", Body: body, ContentType: "application/json"})
	if err != nil {
		switch StatusOf(err) {
		case 400, 404, 405, 415, 501:
			// No such endpoint (PouchDB Server takes _dbs_info for a
			// database name) or no POST form (CouchDB < 2.2).
			return true
		case 401, 403:
			// Admin-only here ([chttpd] admin_only_all_dbs) while the
			// user may still read each database's info.
			return true
		}
		for _, c := range calls {
			c.err = c.db.fail("open database (_dbs_info)", err)
		}
		return false
	}
	defer resp.Body.Close()
	var rows []struct {
		Key   string          `json:"key"`
		Info  *dbInfoJSON     `json:"info"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&rows); err != nil || len(rows) != len(calls) {
		// An answer of another shape: not the endpoint sofa knows.
		return true
	}
	for i, c := range calls {
		row := rows[i]
		switch {
		case row.Key != c.db.name:
			c.err = fmt.Errorf("%s: _dbs_info answered about %q in its place", c.db, row.Key)
		case row.Info != nil && row.Info.DBName != "":
			c.info, c.err = c.db.useInfo(ctx, row.Info)
		case len(row.Error) > 0:
			// An error row says nothing sure about whether the database
			// exists: CouchDB 3.5 answers {"error":"all_dbs_active"} for a
			// database it could not open just now, and under that pressure
			// also "not_found" for one that exists (seen with
			// max_dbs_open=20). Asked again with GET /db, retried as that
			// request is; a 404 there is the database missing.
			c.direct = true
		default:
			c.err = errors.New(c.db.String() + ": _dbs_info answered without info")
		}
	}
	return false
}
