package sofa_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/storage"
)

// TestShardOf_Golden: the shard of a name is FNV-1a 64 of its UTF-8
// bytes modulo n, fixed forever (a set written today is read with it
// tomorrow). The expected values were computed outside Go, from the
// FNV-1a definition (offset basis 0xcbf29ce484222325, prime
// 0x100000001b3).
func TestShardOf_Golden(t *testing.T) {
	for _, c := range []struct {
		name     string
		of8, of3 int
	}{
		{"", 5, 2},
		{"a", 4, 1},
		{"orders", 4, 1},
		{"a/b", 1, 0},
		{"日本語", 7, 0},
		{"db+x (1)$", 6, 0},
		{"_users", 6, 2},
	} {
		if got := sofa.ShardOf(c.name, 8); got != c.of8 {
			t.Errorf("ShardOf(%q, 8) = %d, want %d", c.name, got, c.of8)
		}
		if got := sofa.ShardOf(c.name, 3); got != c.of3 {
			t.Errorf("ShardOf(%q, 3) = %d, want %d", c.name, got, c.of3)
		}
		if got := sofa.ShardOf(c.name, 1); got != 0 {
			t.Errorf("ShardOf(%q, 1) = %d", c.name, got)
		}
	}
}

// TestParseShard: i/n with 0 <= i < n and n >= 1; anything else is an
// *OptionError (the CLI's usage exit code).
func TestParseShard(t *testing.T) {
	for in, want := range map[string]sofa.Shard{"": {}, "0/1": {0, 1}, "2/8": {2, 8}, " 7 / 8 ": {7, 8}} {
		got, err := sofa.ParseShard(in)
		if err != nil || got != want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"3/3", "-1/2", "0/0", "1/0", "x", "1", "1/", "/2", "1/2/3", "a/b"} {
		var oe *sofa.OptionError
		if _, err := sofa.ParseShard(in); !errors.As(err, &oe) {
			t.Errorf("ParseShard(%q): %v, want an *OptionError", in, err)
		}
	}
	if err := (sofa.Shard{Index: 3, Count: 3}).Validate(); err == nil {
		t.Error("Validate of 3/3 passed")
	}
}

// TestSetNames: the member and manifest names of a sharded backup.
func TestSetNames(t *testing.T) {
	s := sofa.Shard{Index: 2, Count: 8}
	for in, want := range map[string][2]string{
		"backup.sofa":          {"backup.shard-2-of-8.sofa", "backup.set.json"},
		"/d/x.y/backup":        {"/d/x.y/backup.shard-2-of-8", "/d/x.y/backup.set.json"},
		"s3://b/p/nightly.tar": {"s3://b/p/nightly.shard-2-of-8.tar", "s3://b/p/nightly.set.json"},
		"b.set.json":           {"b.set.shard-2-of-8.json", "b.set.json"},
	} {
		if got := sofa.ShardArchiveName(in, s); got != want[0] {
			t.Errorf("ShardArchiveName(%q) = %q, want %q", in, got, want[0])
		}
		if got := sofa.SetManifestName(in); got != want[1] {
			t.Errorf("SetManifestName(%q) = %q, want %q", in, got, want[1])
		}
	}
}

// shardNames are the databases of the sharded tests: hostile names
// (every character CouchDB allows in a name) among plain ones.
var shardNames = []string{"alpha", "beta", "gamma", "delta", "epsilon", "a/b", "x+y", "q$(1)", "with-dash_9", "zeta/eta/theta", "m", "n2"}

// listDBs is the server's _all_dbs, read without sofa.
func listDBs(t *testing.T, srv *couchtest.Server) []string {
	t.Helper()
	var names []string
	if err := couchtest.NewClient(srv.URL).GetJSON(context.Background(), "/_all_dbs", &names); err != nil {
		t.Fatal(err)
	}
	return names
}

// archiveDBs lists the databases of the archive name in st.
func archiveDBs(t *testing.T, st storage.Store, name string) []string {
	t.Helper()
	r, err := st.Open(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, dbs, err := archive.List(r)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out []string
	for _, d := range dbs {
		out = append(out, d.Name)
	}
	return out
}

// TestShardedBackup_Library: n workers (goroutines, each with its own
// endpoint and limiter, as separate processes would have) back a server
// up with Shard i/n into one store: every database is in exactly one
// member, the one its hash names; the set restores to a server equal to
// the source (couchtest's oracle); a missing member or a member of
// another run is refused; an empty shard succeeds for backup, copy and
// verify alike (a set's or an archive's verify with Sharded too), while
// an empty selection without a shard stays an error (VerifySet's too).
func TestShardedBackup_Library(t *testing.T) {
	ctx := context.Background()
	a, b := couchtest.Start(t), couchtest.Start(t)
	for i, name := range shardNames {
		seed(t, a, name, 1+i%3)
	}
	const n = 3
	st := &storage.Memory{}
	const base = "nightly/backup.sofa"
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src, err := sofa.Open(ctx, a.URL, sofa.OpenOptions{})
			if err == nil {
				var dst *sofa.Endpoint
				if dst, err = sofa.Open(ctx, base, sofa.OpenOptions{Store: st}); err == nil {
					var sum *sofa.Summary
					sum, err = sofa.Backup(ctx, src, dst, sofa.BackupOptions{Selection: sofa.Selection{Shard: sofa.Shard{Index: i, Count: n}}, SetID: "run-1"})
					if err == nil && !sum.Complete() {
						err = fmt.Errorf("incomplete: %+v", sum)
					}
				}
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}

	// Every database of the source (but _global_changes, which a backup
	// skips) is in exactly one member: the one of its hash.
	seen := map[string]int{}
	for i := range n {
		for _, db := range archiveDBs(t, st, sofa.ShardArchiveName(base, sofa.Shard{Index: i, Count: n})) {
			seen[db]++
			if sofa.ShardOf(db, n) != i {
				t.Errorf("database %q is in member %d, its shard is %d", db, i, sofa.ShardOf(db, n))
			}
		}
	}
	for _, db := range listDBs(t, a) {
		if db == "_global_changes" {
			continue
		}
		if seen[db] != 1 {
			t.Errorf("database %q is in %d members, want 1", db, seen[db])
		}
		delete(seen, db)
	}
	if len(seen) > 0 {
		t.Errorf("members hold databases the source does not list: %v", seen)
	}

	// The set (named by its ARCHIVE name) restores into an empty server,
	// equal to the source.
	setEP, err := sofa.Open(ctx, base, sofa.OpenOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if !sofa.IsSet(ctx, setEP) {
		t.Fatalf("IsSet(%s) = false", base)
	}
	set, err := sofa.OpenSet(ctx, setEP, sofa.SetOptions{})
	if err != nil || len(set.Members) != n || set.SetID != "run-1" {
		t.Fatalf("OpenSet: %+v, %v", set, err)
	}
	dst, err := sofa.Open(ctx, b.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := sofa.PlanRestoreSet(ctx, set, sofa.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := plan.Run(ctx, dst)
	if err != nil || !rs.Complete() {
		t.Fatalf("restore of the set: %+v, %v", rs, err)
	}
	for _, db := range shardNames {
		couchtest.AssertEqual(t, a.DBURL(db), b.DBURL(db), couchtest.CompareOptions{Security: true, RevsLimit: true})
	}
	vs, err := sofa.VerifySet(ctx, set, dst, sofa.VerifyOptions{})
	if err != nil || !vs.Equal || vs.DBsTotal < len(shardNames) {
		t.Fatalf("verify of the set against the copy: %+v, %v", vs, err)
	}
	// The set's _replicator was left out of the restore, and of its
	// verify, and both say so.
	if slices.Contains(listDBs(t, a), "_replicator") {
		isRepl := func(l fleet.LeftOut) bool { return l.Name == "_replicator" }
		if !slices.ContainsFunc(rs.LeftOut, isRepl) || !slices.ContainsFunc(vs.LeftOut, isRepl) {
			t.Errorf("_replicator left out of the set's restore %+v and verify %+v: want it named in both", rs.LeftOut, vs.LeftOut)
		}
	}
	// A selection matching nothing in the set (or in one archive) is an
	// error, unless Sharded: one part of a larger run may hold nothing.
	none := sofa.Selection{Include: []string{"nothing-*"}}
	if vs, err := sofa.VerifySet(ctx, set, dst, sofa.VerifyOptions{Selection: none}); err == nil || !strings.Contains(err.Error(), "no database") {
		t.Errorf("verify of the set, nothing selected: %+v, %v; want an error", vs, err)
	}
	none.Sharded = true
	if vs, err := sofa.VerifySet(ctx, set, dst, sofa.VerifyOptions{Selection: none}); err != nil || !vs.Equal || vs.DBsTotal != 0 {
		t.Errorf("verify of the set, nothing selected, Sharded: %+v, %v; want equal, no error", vs, err)
	}
	if vs, err := sofa.Verify(ctx, set.Members[0], dst, sofa.VerifyOptions{Selection: none}); err != nil || vs.DBsTotal != 0 {
		t.Errorf("verify of a member, nothing selected, Sharded: %+v, %v; want no error", vs, err)
	}

	// A member written by another run is refused, whatever AllowPartial.
	member1 := sofa.ShardArchiveName(base, sofa.Shard{Index: 1, Count: n})
	saved := readAll(t, st, member1)
	src, _ := sofa.Open(ctx, a.URL, sofa.OpenOptions{})
	if _, err := sofa.Backup(ctx, src, setEP, sofa.BackupOptions{Selection: sofa.Selection{Shard: sofa.Shard{Index: 1, Count: n}}, SetID: "run-0", Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	// run-0's manifest overwrote run-1's: put run-1's back.
	if _, err := sofa.Backup(ctx, src, setEP, sofa.BackupOptions{Selection: sofa.Selection{Shard: sofa.Shard{Index: 0, Count: n}}, SetID: "run-1", Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := sofa.OpenSet(ctx, setEP, sofa.SetOptions{AllowPartial: true}); err == nil || !strings.Contains(err.Error(), "another run") {
		t.Fatalf("a member of another run: %v", err)
	}
	writeAll(t, st, member1, saved)

	// A missing member: refused, naming it, unless AllowPartial.
	if err := st.Remove(ctx, member1); err != nil {
		t.Fatal(err)
	}
	if _, err := sofa.OpenSet(ctx, setEP, sofa.SetOptions{}); !errors.Is(err, sofa.ErrPartialSet) || !strings.Contains(err.Error(), member1) {
		t.Fatalf("a partial set: %v", err)
	}
	part, err := sofa.OpenSet(ctx, setEP, sofa.SetOptions{AllowPartial: true})
	if err != nil || len(part.Members) != n-1 || len(part.Missing) != 1 {
		t.Fatalf("a partial set with AllowPartial: %+v, %v", part, err)
	}

	// An empty shard is a success; an empty selection without a shard is
	// not; a shard out of range is an option error.
	empty := -1
	for i := range 64 {
		if !slices.ContainsFunc(listDBs(t, a), func(db string) bool { return sofa.ShardOf(db, 64) == i }) {
			empty = i
			break
		}
	}
	if empty < 0 {
		t.Fatal("no empty shard of 64")
	}
	esh := sofa.Selection{Shard: sofa.Shard{Index: empty, Count: 64}}
	emptyEP, _ := sofa.Open(ctx, "empty/backup.sofa", sofa.OpenOptions{Store: st})
	if sum, err := sofa.Backup(ctx, src, emptyEP, sofa.BackupOptions{Selection: esh}); err != nil || sum.DBsTotal != 0 {
		t.Fatalf("backup of an empty shard: %+v, %v", sum, err)
	}
	if got := archiveDBs(t, st, sofa.ShardArchiveName("empty/backup.sofa", esh.Shard)); len(got) != 0 {
		t.Fatalf("the empty shard's member holds %v", got)
	}
	if sum, err := sofa.Copy(ctx, src, dst, sofa.CopyOptions{Selection: esh}); err != nil || sum.DBsTotal != 0 {
		t.Fatalf("copy of an empty shard: %+v, %v", sum, err)
	}
	if vs, err := sofa.Verify(ctx, src, dst, sofa.VerifyOptions{Selection: esh}); err != nil || vs.DBsTotal != 0 {
		t.Fatalf("verify of an empty shard: %+v, %v", vs, err)
	}
	if _, err := sofa.Copy(ctx, src, dst, sofa.CopyOptions{Selection: sofa.Selection{Include: []string{"nothing-*"}}}); err == nil {
		t.Fatal("an empty selection without a shard passed")
	}
	var oe *sofa.OptionError
	if _, err := sofa.Copy(ctx, src, dst, sofa.CopyOptions{Selection: sofa.Selection{Shard: sofa.Shard{Index: 3, Count: 3}}}); !errors.As(err, &oe) {
		t.Fatalf("shard 3/3: %v, want an *OptionError", err)
	}
}

func readAll(t *testing.T, st storage.Store, name string) []byte {
	t.Helper()
	r, err := st.Open(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := make([]byte, r.Size())
	if _, err := r.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

func writeAll(t *testing.T, st storage.Store, name string, b []byte) {
	t.Helper()
	w, err := st.Create(context.Background(), name, storage.CreateOptions{Overwrite: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}
