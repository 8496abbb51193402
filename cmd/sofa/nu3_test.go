package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
)

// Defects found by a new user on CouchDB 3.5 (nu-report3).

// TestNU3_ReuseExistingVerifyFull (item 3): a document edited on the
// target since the backup keeps its newer revision under
// --reuse-existing, and --verify full says so as every other check does
// ("ok with warnings": not rolled back), exit 0: the archive's revision
// is in the target's revision tree, below the edit, not missing.
func TestNU3_ReuseExistingVerifyFull(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	arCreate(t, srv, "rv", true, arRaw(`{"_id":"d","v":1}`), arRaw(`{"_id":"e","v":1}`))
	path := filepath.Join(t.TempDir(), "rv.sofa")
	arSofa(t, bin, nil, "backup", srv.URL, path, "-q", "--include", "rv").want(t, exitOK)
	var d struct {
		Rev string `json:"_rev"`
	}
	if err := srv.Client().GetJSON(t.Context(), "/rv/d", &d); err != nil {
		t.Fatal(err)
	}
	if err := srv.Client().PutJSON(t.Context(), "/rv/d", map[string]any{"_rev": d.Rev, "v": 2}, nil); err != nil {
		t.Fatal(err)
	}
	for _, verify := range []string{"cheap", "full"} {
		r := arSofa(t, bin, nil, "restore", path, srv.URL, "--reuse-existing", "--verify", verify, "--json")
		r.want(t, exitOK)
		got := rbResult(t, r, "rv")
		if got.Status != fleet.StatusOK || len(got.Failures) != 0 || len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], "not rolled back: 1 of 2") {
			t.Errorf("--verify %s: status %s, failures %+v, warnings %q; want ok, none, one \"not rolled back: 1 of 2\"", verify, got.Status, got.Failures, got.Warnings)
		}
	}
}

// TestNU3_DatabaseURLsRefuseServerFlags (item 7): a run of database URLs
// refuses the flags that choose or shape a server's databases, instead
// of ignoring them: usage error (exit 2), nothing written.
func TestNU3_DatabaseURLsRefuseServerFlags(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	arCreate(t, srv, "part", true, arSmallDocs("p", 3)...)
	for _, flags := range [][]string{{"--exclude", "part"}, {"--include", "x*"}, {"--q", "4"}, {"--with-users"}, {"--verify", "full"}} {
		r := arSofa(t, bin, nil, append([]string{"replicate", srv.DBURL("part"), srv.DBURL("copy"), "--create-target"}, flags...)...)
		r.want(t, exitUsage)
		if line := r.errLine(t); !strings.Contains(line, flags[0]) || !strings.Contains(line, "server mode") {
			t.Errorf("replicate %v: error does not name the flag and why: %s", flags, line)
		}
	}
	var dbs []string
	if err := srv.Client().GetJSON(t.Context(), "/_all_dbs", &dbs); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(dbs, "copy") {
		t.Errorf("a refused replicate created the target: %q", dbs)
	}
	path := filepath.Join(t.TempDir(), "part.sofa")
	for _, flags := range [][]string{{"--exclude", "part"}, {"--include", "part"}} {
		r := arSofa(t, bin, nil, append([]string{"backup", srv.DBURL("part"), path}, flags...)...)
		r.want(t, exitUsage)
		if line := r.errLine(t); !strings.Contains(line, "--include and --exclude") {
			t.Errorf("backup %v: error does not say why: %s", flags, line)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("backup %v: a refused backup wrote %s", flags, path)
		}
	}
	arSofa(t, bin, nil, "replicate", srv.DBURL("part"), srv.DBURL("copy"), "--create-target", "-q").want(t, exitOK)
}

// TestNU3_PartitionedMismatch (item 4): a copy of a partitioned database
// into an existing one that is not keeps the documents and says that the
// property was not copied (a warning in the database's result), and
// `sofa verify` reports the difference. CouchDB only: PouchDB Server has
// no partitioned databases.
func TestNU3_PartitionedMismatch(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	if src.Kind != couchtest.CouchDB {
		t.Skip("partitioned databases are CouchDB's")
	}
	if err := src.Client().PutJSON(t.Context(), "/pp?partitioned=true", nil, nil); err != nil {
		t.Fatal(err)
	}
	arWrite(t, src, "pp", false, arRaw(`{"_id":"a:b","_rev":"1-a","v":1}`))
	tgt := couchtest.Start(t)
	if err := tgt.Client().PutJSON(t.Context(), "/pp", nil, nil); err != nil {
		t.Fatal(err)
	}
	r := arSofa(t, bin, nil, "replicate", src.URL, tgt.URL, "--include", "pp", "--json")
	r.want(t, exitOK)
	if d := rbResult(t, r, "pp"); len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "partitioned") {
		t.Errorf("copy into a target that is not partitioned: warnings %q, want one about the partitioned property", d.Warnings)
	}
	if n := arDocCount(t, tgt, "pp"); n != 1 {
		t.Errorf("target holds %d documents, want 1", n)
	}
	r = arSofa(t, bin, nil, "verify", src.URL, tgt.URL, "--include", "pp")
	r.want(t, exitDifferent)
	if !strings.Contains(r.stdout+r.stderr, "partitioned") {
		t.Errorf("verify does not name the partitioned property:\n%s%s", r.stdout, r.stderr)
	}
	// one database by URL: the same warning, in --json too
	if err := tgt.Client().PutJSON(t.Context(), "/pq", nil, nil); err != nil {
		t.Fatal(err)
	}
	r = arSofa(t, bin, nil, "replicate", src.DBURL("pp"), tgt.DBURL("pq"), "--json")
	r.want(t, exitOK)
	var one struct {
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &one); err != nil || len(one.Warnings) != 1 || !strings.Contains(one.Warnings[0], "partitioned") {
		t.Errorf("database URLs: warnings %q (%v), want one about the partitioned property:\n%s", one.Warnings, err, r.stdout)
	}
	// a target the copy creates is partitioned: no warning, equal
	if err := tgt.Client().DeleteDB(t.Context(), "pp"); err != nil {
		t.Fatal(err)
	}
	r = arSofa(t, bin, nil, "replicate", src.URL, tgt.URL, "--include", "pp", "--json")
	r.want(t, exitOK)
	if d := rbResult(t, r, "pp"); len(d.Warnings) != 0 {
		t.Errorf("copy into a created target: warnings %q, want none", d.Warnings)
	}
	arSofa(t, bin, nil, "verify", src.URL, tgt.URL, "--include", "pp").want(t, exitOK)
}

// TestNU3_RestoreFileNeedsNoTempSpace (item 2): a restore from an
// archive file reads attachments it no longer holds in memory again at
// their offsets instead of spilling them to TMPDIR: with TMPDIR naming
// a directory that does not exist and a blob memory of a few KiB, the
// restore succeeds and the copy is equal; from stdin it needs the spill
// and says so.
func TestNU3_RestoreFileNeedsNoTempSpace(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	var docs []json.RawMessage
	for i := range 6 {
		data := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{byte('a' + i), 0x80, byte(i)}, 8000))
		docs = append(docs, arRaw(`{"_id":"d%d","_attachments":{"f.bin":{"content_type":"application/octet-stream","data":%q}}}`, i, data))
	}
	arCreate(t, src, "atts", true, docs...)
	path := filepath.Join(t.TempDir(), "atts.sofa")
	arSofa(t, bin, nil, "backup", src.URL, path, "-q", "--include", "atts").want(t, exitOK)

	tgt, other := couchtest.Start(t), couchtest.Start(t)
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing")) // for sofa: the servers are started
	arSofa(t, bin, nil, "restore", path, tgt.URL, "-q", "--max-inflight-bytes", "262144").want(t, exitOK)
	couchtest.AssertEqual(t, src.DBURL("atts"), tgt.DBURL("atts"), couchtest.CompareOptions{})

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := arSofa(t, bin, f, "restore", "-", other.URL, "-q", "--max-inflight-bytes", "262144")
	if r.code == exitOK || !strings.Contains(r.stderr, "spill") {
		t.Errorf("from stdin with no TMPDIR: exit %d, stderr %q; want a failed spill (the case spills)", r.code, r.stderr)
	}
}

// TestNU3_SinceLeavesOutRefused (second report, item 2): an incremental
// backup that leaves out databases of the archive it continues, which
// the source still holds (a backup of one database continuing a server's
// backup, or a narrower --include), is refused: a restore of the chain
// would take them for deleted and leave them out (it consolidated a
// server's chain into one database with exit 0). Databases deleted at
// the source since are rightly left out.
func TestNU3_SinceLeavesOutRefused(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "a", true, arSmallDocs("a", 3)...)
	arCreate(t, src, "b", true, arSmallDocs("b", 3)...)
	dir := t.TempDir()
	full, inc := filepath.Join(dir, "full.sofa"), filepath.Join(dir, "inc.sofa")
	arSofa(t, bin, nil, "backup", src.URL, full, "-q").want(t, exitOK)
	for _, args := range [][]string{
		{"backup", src.DBURL("a"), inc, "--since", full},
		{"backup", src.URL, inc, "--since", full, "--include", "a"},
	} {
		r := arSofa(t, bin, nil, args...)
		r.want(t, exitUsage)
		if line := r.errLine(t); !strings.Contains(line, ", b)") || !strings.Contains(line, "deleted") {
			t.Errorf("%v: error does not name b and why: %s", args[1:], line)
		}
		if _, err := os.Stat(inc); err == nil {
			t.Fatalf("%v: a refused backup wrote %s", args[1:], inc)
		}
	}
	if err := src.Client().DeleteDB(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	arSofa(t, bin, nil, "backup", src.URL, inc, "-q", "--since", full).want(t, exitOK)
}
