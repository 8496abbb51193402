package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/s3test"
)

// Incremental sharded backups and chains of sets (issue 13, point 1),
// through n real sofa processes, on local files and under an s3://
// prefix.

// TestShard_IncrementalChain: a full sharded backup, then two
// incremental ones (--since the earlier set, by its manifest or ARCHIVE
// name, or the worker's own member); the chain of sets verifies and
// restores equal to the source (a database deleted at the source is not
// restored, one recreated comes back as it is now); wrong links are
// refused with one line.
func TestShard_IncrementalChain(t *testing.T) {
	dir := t.TempDir()
	shardChainScenario(t, nil, func(name string) string { return filepath.Join(dir, name) },
		func(name string) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		})
}

// TestS3_ShardedIncrementalChain: the same under s3://BUCKET/PREFIX/ on
// versitygw.
func TestS3_ShardedIncrementalChain(t *testing.T) {
	s3srv := s3test.Start(t)
	bucket := s3srv.Bucket(t)
	const prefix = "nightly/"
	shardChainScenario(t, s3srv.Env(), func(name string) string { return "s3://" + bucket + "/" + prefix + name },
		func(name string) {
			if _, err := s3test.Client(s3srv.URL).DeleteObject(context.Background(), &awss3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(prefix + name)}); err != nil {
				t.Fatal(err)
			}
		})
}

func shardChainScenario(t *testing.T, env []string, loc func(string) string, remove func(string)) {
	bin := sofaBin(t)
	run := func(args ...string) arRun { t.Helper(); return s3Sofa(t, bin, env, args...) }
	src := couchtest.Start(t)
	names := shardDBNames(src)
	for i, db := range names {
		docs := arSmallDocs("d", 2+i%4)
		if i%3 == 0 {
			docs = append(docs, arRaw(`{"_id":"att","_attachments":{"a.bin":{"content_type":"application/octet-stream","data":%q}}}`, b64(arRandom(3000))))
		}
		arCreate(t, src, db, true, docs...)
	}
	const n = 3
	workers := func(archive, setID string, since func(i int) string) {
		t.Helper()
		out := make([]arRun, n)
		var wg sync.WaitGroup
		for i := range n {
			args := []string{"backup", src.URL, loc(archive), "--shard", fmt.Sprintf("%d/%d", i, n), "--set-id", setID, "-q"}
			if since != nil {
				args = append(args, "--since", since(i))
			}
			wg.Add(1)
			go func() { defer wg.Done(); out[i] = s3Sofa(t, bin, env, args...) }()
		}
		wg.Wait()
		for _, r := range out {
			r.want(t, exitOK)
		}
	}
	member := func(archive string, i int) string {
		return sofa.ShardArchiveName(loc(archive), sofa.Shard{Index: i, Count: n})
	}
	workers("full.sofa", "run-1", nil)

	// Changes: new documents, an update, a deleted document, a new
	// database, a deleted one.
	arWrite(t, src, "alpha", true, arSmallDocs("later", 20)...)
	arWrite(t, src, "x/y/z", true, arSmallDocs("later", 3)...)
	updateDoc(t, src, "m", "d00000", `"changed":1`)
	deleteDoc(t, src, "a+b", "d00001")
	arCreate(t, src, "late-db", true, arSmallDocs("l", 7)...)
	if err := src.Client().DeleteDB(t.Context(), "beta"); err != nil {
		t.Fatal(err)
	}
	// each worker names what it continues differently: the set's
	// manifest, the ARCHIVE name of the set, its own member
	workers("inc1.sofa", "run-2", func(i int) string {
		switch i {
		case 0:
			return loc("full.set.json")
		case 1:
			return loc("full.sofa")
		}
		return member("full.sofa", i)
	})

	// More: new documents, and a database recreated with other content.
	arWrite(t, src, "alpha", true, arSmallDocs("latest", 5)...)
	if err := src.Client().DeleteDB(t.Context(), "gamma"); err != nil {
		t.Fatal(err)
	}
	arCreate(t, src, "gamma", true, arSmallDocs("g2-", 4)...)
	workers("inc2.sofa", "run-3", func(int) string { return loc("inc1.set.json") })

	// ls says which sets are incremental; the members continue their shard.
	r := run("ls", loc("inc2.set.json"), "--json")
	r.want(t, exitOK)
	var ls struct {
		Incremental bool `json:"incremental"`
		Members     []lsJSON
	}
	decodeJSON(t, r.stdout, &ls)
	if !ls.Incremental || len(ls.Members) != n {
		t.Errorf("ls of the incremental set: %s", r.stdout)
	}
	for i, m := range ls.Members {
		if m.Header.Since == nil || m.Header.Shard == nil || m.Header.Shard.Index != i {
			t.Errorf("member %d: header %+v", i, m.Header)
		}
	}

	chain := []string{loc("full.set.json"), loc("inc1.set.json"), loc("inc2.set.json")}
	run(append([]string{"verify"}, chain...)...).want(t, exitOK)
	run("verify", loc("full.sofa"), loc("inc1.sofa"), "-q").want(t, exitOK) // by ARCHIVE names

	tgt := couchtest.Start(t)
	r = run(append(append([]string{"restore"}, chain...), tgt.URL, "--json")...)
	r.want(t, exitOK)
	for _, db := range names {
		if db == "beta" {
			continue
		}
		arEqual(t, src, db, tgt, db)
	}
	arEqual(t, src, "late-db", tgt, "late-db")
	if arDBExists(t, tgt, "beta") {
		t.Errorf("beta, deleted at the source before inc1, was restored")
	}
	sum := r.summary(t)
	warned := false
	for _, l := range sum.LeftOut {
		if l.Name == "beta" && strings.Contains(l.Reason, "deleted at the source") {
			warned = true
		}
	}
	for _, d := range sum.DBs {
		if d.Name == "beta" {
			t.Errorf("beta, not restored, is among the databases: %+v", d)
		}
	}
	if !warned {
		t.Errorf("the summary does not list beta as left out, deleted at the source: %s", r.stdout)
	}

	// Links that do not hold: one line, usage (2).
	other := fmt.Sprintf("%d/%d", 1, n)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"restore", loc("inc1.set.json"), loc("full.set.json"), tgt.URL}, "starts with a set of full backups"},
		{[]string{"restore", loc("full.set.json"), loc("inc2.set.json"), tgt.URL}, "shard 0"},
		{[]string{"verify", loc("full.set.json"), loc("inc2.set.json")}, "continues"},
		{[]string{"restore", loc("full.set.json"), member("inc1.sofa", 0), tgt.URL}, "not both"},
		{[]string{"backup", src.URL, loc("bad.sofa"), "--shard", other, "--since", member("full.sofa", 0)}, "shard 0/3"},
		{[]string{"backup", src.URL, loc("bad.sofa"), "--shard", "0/2", "--since", loc("full.set.json")}, "3 shards"},
		{[]string{"backup", src.URL, loc("bad.sofa"), "--since", loc("full.set.json")}, "--shard"},
		{[]string{"backup", src.URL, loc("bad.sofa"), "--since", member("full.sofa", 2)}, "--shard 2/3"},
	} {
		r := run(tc.args...)
		r.want(t, exitUsage)
		if line := r.errLine(t); !strings.Contains(line, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%v: %q, want one line holding %q\n%s", tc.args, line, tc.want, r.stderr)
		}
	}

	// A member missing from the middle of the chain: refused (exit 1),
	// or with --allow-partial its shard is left out and the others come
	// back whole (exit 3: not everything was restored).
	gone := filepath.Base(member("inc1.sofa", 1))
	remove(gone)
	r = run(append(append([]string{"restore"}, chain...), tgt.URL)...)
	r.want(t, exitFatal)
	if line := r.errLine(t); !strings.Contains(line, "partial") || !strings.Contains(line, gone) {
		t.Errorf("restore of a chain with a member missing: %q", line)
	}
	run(append(append([]string{"verify"}, chain...), "--allow-partial")...).want(t, exitPartial)
	tgt2 := couchtest.Start(t)
	r = run(append(append([]string{"restore"}, chain...), tgt2.URL, "--allow-partial", "-q")...)
	r.want(t, exitPartial)
	if !strings.Contains(r.stderr, gone) {
		t.Errorf("--allow-partial does not name the missing member:\n%s", r.stderr)
	}
	for _, db := range append(names, "late-db") {
		switch {
		case db == "beta":
		case sofa.ShardOf(db, n) == 1:
			if arDBExists(t, tgt2, db) {
				t.Errorf("%q of the shard with a missing member was restored", db)
			}
		default:
			arEqual(t, src, db, tgt2, db)
		}
	}
}

// updateDoc gives document id of db a new revision with field added.
func updateDoc(t *testing.T, srv *couchtest.Server, db, id, field string) {
	t.Helper()
	var doc map[string]any
	if err := srv.Client().GetJSON(t.Context(), "/"+couchtest.EscapeDB(db)+"/"+id, &doc); err != nil {
		t.Fatal(err)
	}
	arWrite(t, srv, db, true, arRaw(`{"_id":%q,"_rev":%q,%s}`, id, doc["_rev"], field))
}

// deleteDoc deletes document id of db.
func deleteDoc(t *testing.T, srv *couchtest.Server, db, id string) {
	t.Helper()
	var doc map[string]any
	if err := srv.Client().GetJSON(t.Context(), "/"+couchtest.EscapeDB(db)+"/"+id, &doc); err != nil {
		t.Fatal(err)
	}
	arWrite(t, srv, db, true, arRaw(`{"_id":%q,"_rev":%q,"_deleted":true}`, id, doc["_rev"]))
}
