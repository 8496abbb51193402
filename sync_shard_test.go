package sofa_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestSync_Sharded: two Sync runs given shards 0/2 and 1/2 of one source,
// each to its own target: after the catch-up, a write into every
// database is copied by its shard's run only; the other run's target
// never holds the database, and the other run never names it (status,
// events). Each run hears of some of the other shard's writes before
// the last of its own (the writes are ordered through the source's
// _db_updates, or, when polled, a full poll after them is waited for),
// so a run that took a foreign wake shows it.
func TestSync_Sharded(t *testing.T) {
	for _, poll := range []bool{false, true} {
		t.Run(map[bool]string{false: "watch", true: "poll"}[poll], func(t *testing.T) { testSyncSharded(t, poll) })
	}
}

// testSyncSharded is TestSync_Sharded with the source watched (its
// _db_updates where it has one) or polled.
func testSyncSharded(t *testing.T, poll bool) {
	ctx := context.Background()
	a, b0, b1 := couchtest.Start(t), couchtest.Start(t), couchtest.Start(t)
	ca := couchtest.NewClient(a.URL)
	byShard := [2][]string{}
	for i := range 8 {
		name := fmt.Sprintf("sh%d", i)
		seed(t, a, name, 2)
		byShard[sofa.ShardOf(name, 2)] = append(byShard[sofa.ShardOf(name, 2)], name)
	}
	if len(byShard[0]) < 2 || len(byShard[1]) < 2 {
		t.Fatalf("shards %v: want two databases in each", byShard)
	}
	enableDBUpdates(t, a)
	dsts := [2]*couchtest.Server{b0, b1}
	var runs [2]*syncRun
	for i := range runs {
		o := sofa.SyncOptions{PollInterval: 200 * time.Millisecond, Poll: poll}
		o.Copy.Selection.Shard = sofa.Shard{Index: i, Count: 2}
		runs[i] = startSync(t, a.URL, dsts[i].URL, o)
	}
	for i, r := range runs {
		r.wait(fmt.Sprintf("run %d's catch-up", i), func() bool { return r.caughtUp })
	}
	polled := runs[0].mode == "poll"

	// Two phases, each a write into half of every shard's databases: a
	// run hears of the first phase's foreign writes before its own of the
	// second (no database is written twice: its row would move on).
	write := func(dbs []string) {
		since := dbUpdatesSeq(t, ca, polled)
		for _, db := range dbs {
			if _, err := ca.PutDoc(ctx, db, "live", map[string]any{"at": time.Now().UnixNano()}); err != nil {
				t.Fatal(err)
			}
		}
		waitDBUpdates(t, ca, since, dbs, polled)
	}
	h0, h1 := len(byShard[0])/2, len(byShard[1])/2
	write(append(slices.Clone(byShard[0][:h0]), byShard[1][:h1]...))
	write(append(slices.Clone(byShard[0][h0:]), byShard[1][h1:]...))
	var polls [2]int
	for i := range runs {
		polls[i] = runs[i].pollsNow()
	}
	for i, r := range runs {
		r.wait(fmt.Sprintf("run %d's writes", i), func() bool {
			for _, db := range byShard[i] {
				if r.written[db] < 3 {
					return false
				}
			}
			// Polled: a listing begun after every write has been noted.
			return !polled || r.polls >= polls[i]+3
		})
	}
	for i, r := range runs {
		for _, db := range byShard[i] {
			couchtest.AssertEqual(t, a.URL+"/"+db, dsts[i].URL+"/"+db)
		}
		var onTarget []string
		for _, db := range listDBs(t, dsts[i]) {
			if !strings.HasPrefix(db, "_") {
				onTarget = append(onTarget, db)
			}
		}
		slices.Sort(onTarget) // PouchDB Server lists in creation order
		if !slices.Equal(onTarget, byShard[i]) {
			t.Errorf("run %d's target holds %v, want its shard's %v", i, onTarget, byShard[i])
		}
		for db := range r.status().DBs {
			if !strings.HasPrefix(db, "_") && sofa.ShardOf(db, 2) != i {
				t.Errorf("run %d (shard %d/2) follows %q of shard %d", i, i, db, sofa.ShardOf(db, 2))
			}
		}
		sum, _ := r.stop()
		if sum.Runs == 0 || len(sum.Created) != 0 {
			t.Errorf("run %d: %d catch-up copies, created %v", i, sum.Runs, sum.Created)
		}
		r.mu.Lock()
		for db := range r.written {
			if sofa.ShardOf(db, 2) != i {
				t.Errorf("run %d copied %q of the other shard", i, db)
			}
		}
		r.mu.Unlock()
	}
}

// dbUpdatesSeq is the source's current _db_updates seq ("" when polled:
// the source has no feed, or the runs do not use it).
func dbUpdatesSeq(t *testing.T, c *couchtest.Client, polled bool) string {
	t.Helper()
	if polled {
		return ""
	}
	var feed struct {
		LastSeq json.RawMessage `json:"last_seq"`
	}
	if err := c.GetJSON(context.Background(), "/_db_updates?since=now", &feed); err != nil {
		t.Fatal(err)
	}
	return strings.Trim(string(feed.LastSeq), `"`)
}

// waitDBUpdates follows the source's _db_updates (longpoll) from since
// until every database of dbs has a row: what is written next comes
// after them in every reader's feed. Nothing to wait for when polled.
func waitDBUpdates(t *testing.T, c *couchtest.Client, since string, dbs []string, polled bool) {
	t.Helper()
	if polled {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	seen := map[string]bool{}
	for len(seen) < len(dbs) {
		var feed struct {
			Results []struct {
				DBName string `json:"db_name"`
			} `json:"results"`
			LastSeq json.RawMessage `json:"last_seq"`
		}
		if err := c.GetJSON(ctx, "/_db_updates?feed=longpoll&timeout=10000&since="+since, &feed); err != nil {
			t.Fatalf("_db_updates: %v (seen %v of %v)", err, seen, dbs)
		}
		for _, r := range feed.Results {
			if slices.Contains(dbs, r.DBName) {
				seen[r.DBName] = true
			}
		}
		since = strings.Trim(string(feed.LastSeq), `"`)
	}
}
