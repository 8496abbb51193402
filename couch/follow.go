package couch

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sofadb/sofa/replicate"
)

var _ replicate.Follower = (*DB)(nil)

// Follow reads `_changes?style=all_docs&feed=continuous` from since on one
// connection, with `heartbeat` (a newline the server writes after that
// long without a change), calling fn for each row as it arrives. With
// o.Docs the rows carry `include_docs` (see ChangesWithDocs). It does not
// retry: it returns when the connection ends, ctx.Err() when cancelled, an
// error saying why otherwise (a server that closes the feed cleanly, after
// its `last_seq` line, gives ErrFeedEnded). The caller resumes from the
// last row's seq. A connection silent for three heartbeats is taken as
// dead and closed.
func (d *DB) Follow(ctx context.Context, since replicate.Seq, o replicate.FollowOptions, fn func(replicate.Change) error) error {
	fn = d.skipServerOwned(fn)
	hb := o.Heartbeat
	if hb <= 0 {
		hb = replicate.DefaultHeartbeat
	}
	// A streamed read is cancelled after AttemptTimeout without a byte:
	// heartbeats must come well within it.
	hb = min(hb, d.srv.opts.AttemptTimeout/3)
	q := "style=all_docs&feed=continuous&heartbeat=" + strconv.FormatInt(hb.Milliseconds(), 10) +
		"&since=" + url.QueryEscape(since.String())
	if o.Docs {
		q += "&include_docs=true"
		if d.srv.Vendor != VendorPouchDB {
			q += "&att_encoding_info=true"
		}
	}
	d.pending.Store(0) // not known while following
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := d.srv.do(fctx, &request{Method: "GET", Path: d.path + "/_changes", Query: q, Stream: true, NoRetry: true})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return d.fail("follow changes", err)
	}
	defer resp.Body.Close()
	if o.Connected != nil {
		o.Connected()
	}
	// The watchdog: any byte (row or heartbeat) re-arms it.
	dead := &atomic.Bool{}
	wd := time.AfterFunc(3*hb, func() { dead.Store(true); cancel() })
	defer wd.Stop()
	body := &armingReader{r: resp.Body, t: wd, d: 3 * hb}
	_, err = ParseContinuousChanges(body, func(c replicate.Change) error {
		// The time fn waits (the engine's workers are busy) is not the
		// server's silence.
		wd.Stop()
		defer wd.Reset(3 * hb)
		return fn(c)
	})
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case dead.Load():
		return d.fail("follow changes", errors.New("no heartbeat for "+(3*hb).String()+": connection taken as dead"))
	case err == nil:
		return ErrFeedEnded
	}
	return d.fail("follow changes", err)
}

// ErrFeedEnded: the server closed a continuous feed after its last_seq line
// (a timeout of its own); reconnecting goes on.
var ErrFeedEnded = errors.New("the server ended the changes feed")

type armingReader struct {
	r interface{ Read([]byte) (int, error) }
	t *time.Timer
	d time.Duration
}

func (a *armingReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.t.Reset(a.d)
	}
	return n, err
}

// Pending is the `pending` count of the last `_changes` page read (the
// changes after it), -1 when not known: before the first page ends, on a
// server that does not say (PouchDB Server), and while following a
// continuous feed, whose rows do not carry it.
func (d *DB) Pending() int64 { return d.pending.Load() - 1 }
