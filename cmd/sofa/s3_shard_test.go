package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/s3test"
)

// TestS3_ShardedSet: n sofa processes given --shard i/n back a server up
// to s3://BUCKET/PREFIX/backup.sofa: the members and the set manifest
// are objects under the key prefix, each database in exactly one member;
// ls, verify (alone and against the server) and restore accept the set
// from s3://, named by its ARCHIVE name or its manifest; the restored
// server equals the source (couchtest's oracle); a member missing from
// the bucket is refused with one line and exit 1.
func TestS3_ShardedSet(t *testing.T) {
	bin := sofaBin(t)
	s3srv := s3test.Start(t)
	bucket := s3srv.Bucket(t)
	env := s3srv.Env()
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
	const prefix = "nightly/2026-12-01/"
	base := "s3://" + bucket + "/" + prefix + "backup.sofa"
	manifest := "s3://" + bucket + "/" + prefix + "backup.set.json"

	out := make([]arRun, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = s3Sofa(t, bin, env, "backup", src.URL, base, "--shard", fmt.Sprintf("%d/%d", i, n), "--set-id", "run-s3", "-q")
		}()
	}
	wg.Wait()
	for _, r := range out {
		r.want(t, exitOK)
	}

	// The objects: n members and the manifest, all under the prefix.
	keys := s3Objects(t, s3srv.URL, bucket)
	want := []string{prefix + "backup.set.json"}
	for i := range n {
		want = append(want, prefix+fmt.Sprintf("backup.shard-%d-of-%d.sofa", i, n))
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("objects %v, want %v", keys, want)
	}

	// Each database in exactly one member, the one of its hash.
	seen := map[string]int{}
	for i := range n {
		member := sofa.ShardArchiveName(base, sofa.Shard{Index: i, Count: n})
		r := s3Sofa(t, bin, env, "ls", "--json", member)
		r.want(t, exitOK)
		var l lsJSON
		decodeJSON(t, r.stdout, &l)
		for _, db := range l.names() {
			seen[db]++
			if sofa.ShardOf(db, n) != i {
				t.Errorf("member %d holds %q, whose shard is %d", i, db, sofa.ShardOf(db, n))
			}
		}
	}
	for _, db := range userDBs(listed) {
		if seen[db] != 1 {
			t.Errorf("database %q is in %d members, want exactly 1", db, seen[db])
		}
	}

	// ls of the set, by ARCHIVE name and by manifest.
	for _, name := range []string{base, manifest} {
		r := s3Sofa(t, bin, env, "ls", name, "--json")
		r.want(t, exitOK)
		var ls struct {
			Count   int `json:"count"`
			Members []struct {
				Databases []struct{ Name string } `json:"databases"`
			} `json:"members"`
		}
		decodeJSON(t, r.stdout, &ls)
		if ls.Count != n || len(ls.Members) != n {
			t.Errorf("ls %s: %s", name, r.stdout)
		}
		if strings.Contains(r.stdout+r.stderr, s3test.SecretKey) {
			t.Errorf("ls output holds the secret")
		}
	}

	// verify alone, restore, verify against the restored server and the source.
	s3Sofa(t, bin, env, "verify", manifest, "-q").want(t, exitOK)
	s3Sofa(t, bin, env, "verify", base, "-q").want(t, exitOK)
	tgt := couchtest.Start(t)
	s3Sofa(t, bin, env, "restore", base, tgt.URL, "-q").want(t, exitOK)
	for _, db := range names {
		couchtest.AssertEqual(t, src.DBURL(db), tgt.DBURL(db), couchtest.CompareOptions{Security: true, RevsLimit: true})
	}
	s3Sofa(t, bin, env, "verify", manifest, tgt.URL, "--full", "-q").want(t, exitOK)
	s3Sofa(t, bin, env, "verify", base, src.URL, "-q").want(t, exitOK)

	// A member missing from the bucket: one line naming it, exit 1, nothing restored.
	missingKey := prefix + fmt.Sprintf("backup.shard-1-of-%d.sofa", n)
	if _, err := s3test.Client(s3srv.URL).DeleteObject(context.Background(), &awss3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(missingKey)}); err != nil {
		t.Fatal(err)
	}
	tgt2 := couchtest.Start(t)
	for _, args := range [][]string{
		{"restore", manifest, tgt2.URL},
		{"restore", base, tgt2.URL},
		{"verify", manifest},
		{"verify", base, src.URL},
	} {
		r := s3Sofa(t, bin, env, args...)
		r.want(t, exitFatal)
		line := r.errLine(t)
		if !strings.Contains(line, "partial") || !strings.Contains(line, missingKey) || !strings.Contains(line, "--allow-partial") {
			t.Errorf("%s of a partial set: %q", args[0], line)
		}
		if strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%s: more than one line on stderr:\n%s", args[0], r.stderr)
		}
	}
	if dbs := allDBs(t, tgt2); slices.ContainsFunc(names, func(n string) bool { return slices.Contains(dbs, n) }) {
		t.Errorf("a refused partial restore created databases: %v", dbs)
	}
	if r := s3Sofa(t, bin, env, "ls", manifest); r.code != exitOK || !strings.Contains(r.stdout, "MISSING") {
		t.Errorf("ls of a partial set: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := s3Sofa(t, bin, env, "restore", manifest, tgt2.URL, "--allow-partial", "-q")
	r.want(t, exitPartial) // accepted, not everything restored
	if !strings.Contains(r.stderr, missingKey) {
		t.Errorf("--allow-partial does not name the missing member:\n%s", r.stderr)
	}
	for _, db := range names {
		if sofa.ShardOf(db, n) != 1 {
			couchtest.AssertEqual(t, src.DBURL(db), tgt2.DBURL(db))
		} else if arDBExists(t, tgt2, db) {
			t.Errorf("%q of the missing member was restored", db)
		}
	}
}
