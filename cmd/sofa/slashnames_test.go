package main

import (
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// TestVerify_SlashNamesOnPouchDB: PouchDB Server keeps a database created
// as "a/b" under the name "ab" (its _all_dbs lists "ab"; "a/b" still
// reaches it). After a server replication into it, verify compares "a/b"
// with its copy and does not also report "ab" as a database only the
// target holds; a database the target alone holds is still reported.
func TestVerify_SlashNamesOnPouchDB(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	dst := couchtest.StartKind(t, couchtest.PouchDB)
	for _, db := range []string{"a/b", "org/x/y", "plain"} {
		arCreate(t, src, db, true, arSmallDocs("d", 3)...)
	}
	arSofa(t, bin, nil, "replicate", src.URL, dst.URL, "-q").want(t, exitOK)
	arSofa(t, bin, nil, "replicate", src.URL, dst.URL, "-q").want(t, exitOK) // again: nothing to do

	r := arSofa(t, bin, nil, "verify", src.URL, dst.URL)
	if r.code != exitOK || strings.Contains(r.stderr, "exists only in b") {
		t.Fatalf("verify after the copy: exit %d:\n%s", r.code, r.stderr)
	}
	arCreate(t, dst, "extra", true, arSmallDocs("d", 1)...)
	r = arSofa(t, bin, nil, "verify", src.URL, dst.URL)
	if r.code != exitDifferent || strings.Count(r.stderr, "exists only in b") != 1 || !strings.Contains(r.stderr, `"extra" exists only in b`) {
		t.Errorf("verify with a database only the target holds: exit %d:\n%s", r.code, r.stderr)
	}
}
