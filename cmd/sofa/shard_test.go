package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// Sharded runs (issue 13, point 4) through n real sofa processes.

// shardDBNames are hostile names (every character CouchDB allows in a
// database name) among plain ones; on PouchDB Server, which takes any
// name, a unicode one too.
func shardDBNames(srv *couchtest.Server) []string {
	names := []string{"alpha", "beta", "gamma", "delta", "epsilon", "a+b", "q$(1)", "with-dash_9", "folder/file", "x/y/z", "m", "n2"}
	if srv.Kind == couchtest.PouchDB {
		names = append(names, "ünïcödé-日本")
	}
	return names
}

// runParallel runs one sofa process per argument list at once.
func runParallel(t *testing.T, bin string, argss [][]string) []arRun {
	t.Helper()
	out := make([]arRun, len(argss))
	var wg sync.WaitGroup
	for i, args := range argss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = arSofa(t, bin, nil, args...)
		}()
	}
	wg.Wait()
	return out
}

// TestShard_Processes: n sofa processes given --shard 0/n .. n-1/n
// cover every database exactly once, for backup (each member holds the
// databases of its hash and each worker says it wrote its member, with
// its size, the set restores equal to the source by
// couchtest's oracle, and verify accepts the set alone and against the
// copy), replicate (the copies are equal) and verify. A partial set is
// refused with one line naming the missing member, unless
// --allow-partial; an empty shard succeeds; bad --shard values are usage
// errors.
func TestShard_Processes(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	names := shardDBNames(src)
	for i, db := range names {
		docs := arSmallDocs("d", 2+i%4)
		if i%3 == 0 {
			docs = append(docs, arRaw(`{"_id":"att","_attachments":{"a.bin":{"content_type":"application/octet-stream","data":%q}}}`, b64(arRandom(3000))))
		}
		arCreate(t, src, db, true, docs...)
	}
	listed := allDBs(t, src)
	const n = 3
	dir := t.TempDir()
	base := filepath.Join(dir, "backup.sofa")

	// Backup: n processes, one set.
	var argss [][]string
	for i := range n {
		argss = append(argss, []string{"backup", src.URL, base, "--shard", fmt.Sprintf("%d/%d", i, n), "--set-id", "run-7", "--json"})
	}
	seen := map[string]int{}
	for i, r := range runParallel(t, bin, argss) {
		r.want(t, exitOK)
		member := sofa.ShardArchiveName(base, sofa.Shard{Index: i, Count: n})
		if st, err := os.Stat(member); err != nil {
			t.Error(err)
		} else if want := fmt.Sprintf("sofa: archive %s written (%s)\n", member, humanBytes(st.Size())); !strings.Contains(r.stderr, want) {
			t.Errorf("worker %d: stderr lacks %q:\n%s", i, want, r.stderr)
		}
		for _, db := range arLs(t, bin, member).names() {
			seen[db]++
			if sofa.ShardOf(db, n) != i {
				t.Errorf("member %d holds %q, whose shard is %d", i, db, sofa.ShardOf(db, n))
			}
		}
	}
	for _, db := range listed {
		if db == "_global_changes" {
			continue
		}
		if seen[db] != 1 {
			t.Errorf("database %q is in %d members, want exactly 1", db, seen[db])
		}
	}
	if len(seen) != len(listed)-btoi(slices.Contains(listed, "_global_changes")) {
		t.Errorf("members hold %d databases, the source lists %d: %v", len(seen), len(listed), seen)
	}
	manifest := filepath.Join(dir, "backup.set.json")
	if _, err := os.Stat(manifest); err != nil {
		t.Fatal(err)
	}

	// The set checks out alone, restores (named by its ARCHIVE name) into
	// an empty server equal to the source, and verifies against the copy.
	arSofa(t, bin, nil, "verify", manifest).want(t, exitOK)
	r := arSofa(t, bin, nil, "ls", base, "--json")
	r.want(t, exitOK)
	var ls struct {
		Count   int `json:"count"`
		Members []struct {
			Databases []struct{ Name string } `json:"databases"`
		} `json:"members"`
	}
	decodeJSON(t, r.stdout, &ls)
	if ls.Count != n || len(ls.Members) != n {
		t.Errorf("ls of the set: %s", r.stdout)
	}
	tgt := couchtest.Start(t)
	arSofa(t, bin, nil, "restore", base, tgt.URL, "-q").want(t, exitOK)
	for _, db := range names {
		couchtest.AssertEqual(t, src.DBURL(db), tgt.DBURL(db), couchtest.CompareOptions{Security: true, RevsLimit: true})
	}
	arSofa(t, bin, nil, "verify", manifest, tgt.URL, "--full").want(t, exitOK)

	// A partial set: refused with one clear line, unless --allow-partial.
	missing := sofa.ShardArchiveName(base, sofa.Shard{Index: 1, Count: n})
	if err := os.Rename(missing, missing+".away"); err != nil {
		t.Fatal(err)
	}
	tgt2 := couchtest.Start(t)
	r = arSofa(t, bin, nil, "restore", manifest, tgt2.URL)
	r.want(t, exitFatal)
	if line := r.errLine(t); !strings.Contains(line, "partial") || !strings.Contains(line, missing) || !strings.Contains(line, "--allow-partial") {
		t.Errorf("restore of a partial set: %q", line)
	}
	if dbs := allDBs(t, tgt2); slices.ContainsFunc(names, func(n string) bool { return slices.Contains(dbs, n) }) {
		t.Errorf("a refused partial restore created databases: %v", dbs)
	}
	arSofa(t, bin, nil, "verify", manifest).want(t, exitFatal)
	// an incremental of the missing member's shard cannot continue it,
	// and a full member cannot join an incremental set: the advice says so
	r = arSofa(t, bin, nil, "backup", src.URL, filepath.Join(dir, "inc.sofa"), "--shard", fmt.Sprintf("1/%d", n), "--set-id", "inc", "--since", manifest)
	if line := r.errLine(t); r.code == exitOK || !strings.Contains(line, "is missing") || !strings.Contains(line, "full sharded backup of every shard") {
		t.Errorf("an incremental of the missing member's shard: exit %d, %q", r.code, line)
	}
	// checked as far as present: not "sound" with exit 0 (a new user
	// found that), but exit 3 naming what was not checked, alone and
	// against a server
	for _, args := range [][]string{{"verify", manifest, "--allow-partial"}, {"verify", manifest, tgt.URL, "--allow-partial"}} {
		r := arSofa(t, bin, nil, args...)
		r.want(t, exitPartial)
		if line := r.errLine(t); !strings.Contains(line, "missing") || !strings.Contains(line, "not checked") {
			t.Errorf("%v: last line %q", args, line)
		}
	}
	if r := arSofa(t, bin, nil, "ls", manifest); r.code != exitOK || !strings.Contains(r.stdout, "MISSING") {
		t.Errorf("ls of a partial set: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// accepted, and said: exit 3, the member in --json (a new user found
	// exit 0 and nothing in the JSON)
	r = arSofa(t, bin, nil, "restore", manifest, tgt2.URL, "--allow-partial", "--json")
	r.want(t, exitPartial)
	if !strings.Contains(r.stderr, missing) {
		t.Errorf("--allow-partial does not name the missing member:\n%s", r.stderr)
	}
	if mm := r.summary(t).MissingMembers; len(mm) != 1 || !strings.Contains(mm[0], filepath.Base(missing)) {
		t.Errorf("--json missing_members %q, want the one missing, %s", mm, filepath.Base(missing))
	}
	for _, db := range names {
		if sofa.ShardOf(db, n) != 1 {
			couchtest.AssertEqual(t, src.DBURL(db), tgt2.DBURL(db))
		} else if arDBExists(t, tgt2, db) {
			t.Errorf("%q of the missing member was restored", db)
		}
	}
	os.Rename(missing+".away", missing)

	// Every member missing: nothing to check, list or restore, whatever
	// --allow-partial says (a new user found verify "the 0 members
	// present of 3 are sound", exit 3, and ls exit 0).
	for i := range n {
		m := sofa.ShardArchiveName(base, sofa.Shard{Index: i, Count: n})
		if err := os.Rename(m, m+".away"); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(m+".away", m)
	}
	for _, args := range [][]string{{"verify", manifest, "--allow-partial"}, {"ls", manifest}, {"restore", manifest, tgt2.URL, "--allow-partial"}} {
		r := arSofa(t, bin, nil, args...)
		r.want(t, exitFatal)
		if line := r.errLine(t); !strings.Contains(line, "none of the") {
			t.Errorf("%v with every member missing: last line %q", args, line)
		}
	}
	for i := range n {
		m := sofa.ShardArchiveName(base, sofa.Shard{Index: i, Count: n})
		os.Rename(m+".away", m)
	}

	// Replicate and verify: n processes each.
	rep := couchtest.Start(t)
	argss = nil
	for i := range n {
		argss = append(argss, []string{"replicate", src.URL, rep.URL, "--shard", fmt.Sprintf("%d/%d", i, n), "-q"})
	}
	for _, r := range runParallel(t, bin, argss) {
		r.want(t, exitOK)
	}
	for _, db := range names {
		couchtest.AssertEqual(t, src.DBURL(db), rep.DBURL(db), couchtest.CompareOptions{Security: true, RevsLimit: true})
	}
	for i := range argss {
		argss[i] = []string{"verify", src.URL, rep.URL, "--shard", fmt.Sprintf("%d/%d", i, n), "--json"}
	}
	compared := map[string]int{}
	for _, r := range runParallel(t, bin, argss) {
		r.want(t, exitOK)
		var res verifyResult
		decodeJSON(t, r.stdout, &res)
		for _, d := range res.DBs {
			compared[d.Name]++
		}
	}
	// (as listed: PouchDB Server lists "folder/file" as "folderfile")
	for _, db := range userDBs(listed) {
		if compared[db] != 1 {
			t.Errorf("verify --shard compared %q %d times, want 1", db, compared[db])
		}
	}
	if len(compared) != len(userDBs(listed)) {
		t.Errorf("verify --shard compared %v, the source lists %v", compared, listed)
	}

	// An empty shard: every verb succeeds with nothing to do.
	empty := -1
	for i := range 64 {
		if !slices.ContainsFunc(listed, func(db string) bool { return sofa.ShardOf(db, 64) == i }) {
			empty = i
			break
		}
	}
	sh := fmt.Sprintf("%d/64", empty)
	r = arSofa(t, bin, nil, "backup", src.URL, filepath.Join(dir, "e.sofa"), "--shard", sh)
	r.want(t, exitOK)
	// no --set-id: said (a new user's rerun of one worker went unnoticed)
	if !strings.Contains(r.stderr, "--shard without --set-id") {
		t.Errorf("a sharded backup without --set-id does not warn:\n%s", r.stderr)
	}
	arSofa(t, bin, nil, "replicate", src.URL, rep.URL, "--shard", sh, "-q").want(t, exitOK)
	arSofa(t, bin, nil, "verify", src.URL, rep.URL, "--shard", sh, "-q").want(t, exitOK)

	// Bad values are usage errors, before anything is contacted.
	for _, bad := range []string{"3/3", "-1/2", "0/0", "x", "1"} {
		r := arSofa(t, bin, nil, "backup", src.URL, filepath.Join(dir, "bad.sofa"), "--shard", bad)
		r.want(t, exitUsage)
		if !strings.Contains(r.errLine(t), "--shard") {
			t.Errorf("--shard %s: %q", bad, r.errLine(t))
		}
		arSofa(t, bin, nil, "replicate", src.URL, rep.URL, "--shard", bad).want(t, exitUsage)
		arSofa(t, bin, nil, "verify", src.URL, rep.URL, "--shard", bad).want(t, exitUsage)
	}
	arSofa(t, bin, nil, "backup", src.DBURL("alpha"), filepath.Join(dir, "db.sofa"), "--shard", "0/2").want(t, exitUsage)
	arSofa(t, bin, nil, "backup", src.URL, "-", "--shard", "0/2").want(t, exitUsage)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func decodeJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("not JSON (%v):\n%s", err, s)
	}
}
