package couchtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"
)

// SettledMarker begins the name of DBUpdatesSettled's marker databases:
// CouchDB may put one more event of one into `_db_updates` after the
// deletion waited for, which a test recording a run's requests drops.
const SettledMarker = "zz-settled-"

var markerN atomic.Int64

// DBUpdatesSettled returns once every database event on srv so far is in
// its `_db_updates` feed (CouchDB writes them up to `[global_changes]
// max_write_delay` late; PouchDB Server has no such feed: nil at once),
// so that a run started afterwards, which follows the feed from its
// position then, never hears of them. A marker database created and
// deleted now is in the feed once everything before it is; its name
// starts with SettledMarker and is new at each call (a name created again
// just after its DELETE may get 412 from CouchDB for a while). The server
// needs `_global_changes`.
func DBUpdatesSettled(ctx context.Context, srv *Server) error {
	if srv.Kind != CouchDB {
		return nil
	}
	c := NewClient(srv.URL)
	var now struct {
		LastSeq json.RawMessage `json:"last_seq"`
	}
	if err := c.GetJSON(ctx, "/_db_updates?feed=normal&since=now", &now); err != nil {
		return err
	}
	var since string
	if err := json.Unmarshal(now.LastSeq, &since); err != nil {
		since = string(now.LastSeq) // a number
	}
	marker := fmt.Sprintf("%s%d-%d", SettledMarker, time.Now().UnixNano(), markerN.Add(1))
	if err := c.CreateDB(ctx, marker); err != nil {
		return err
	}
	if err := c.DeleteDB(ctx, marker); err != nil {
		return err
	}
	tick := time.NewTicker(100 * time.Millisecond) // the feed is written every max_write_delay
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for {
		var feed struct {
			Results []struct {
				DBName string `json:"db_name"`
				Type   string `json:"type"`
			} `json:"results"`
		}
		if err := c.GetJSON(ctx, "/_db_updates?since="+url.QueryEscape(since), &feed); err != nil {
			return err
		}
		for _, r := range feed.Results {
			if r.DBName == marker && r.Type == "deleted" {
				return nil
			}
		}
		select {
		case <-tick.C:
		case <-deadline:
			return fmt.Errorf("couchtest: the deletion of database %s never reached _db_updates", marker)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
