package verify_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/verify"
)

func TestMain(m *testing.M) { couchtest.Main(m) }

func raw(format string, args ...any) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(format, args...))
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// fixture is written with new_edits=false into both databases: conflicts,
// a deleted branch, a tombstone with fields, an attachment, odd ids.
func fixture() []json.RawMessage {
	return []json.RawMessage{
		raw(`{"_id":"plain","_rev":"1-a","n":1.5,"s":"x<y"}`),
		raw(`{"_id":"r1","_rev":"3-c","v":3,"_revisions":{"start":3,"ids":["c","b","a"]}}`),
		raw(`{"_id":"r1","_rev":"2-x","_deleted":true,"_revisions":{"start":2,"ids":["x","a"]}}`),
		raw(`{"_id":"multi","_rev":"1-a","v":"a"}`),
		raw(`{"_id":"multi","_rev":"1-b","v":"b"}`),
		raw(`{"_id":"r4","_rev":"2-d","_deleted":true,"kept":"field","_revisions":{"start":2,"ids":["d","a"]}}`),
		raw(`{"_id":"a+b","_rev":"1-a"}`),
		raw(`{"_id":"folder/file","_rev":"1-a"}`),
		raw(`{"_id":"att","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"_attachments":{"t.txt":{"content_type":"text/plain","revpos":2,"data":%q}}}`, b64("hello")),
	}
}

type pairDB struct {
	srv      *couchtest.Server
	a, b     string
	adb, bdb *couch.DB
}

func newPair(t *testing.T) *pairDB {
	t.Helper()
	srv := couchtest.Shared(t)
	p := &pairDB{srv: srv, a: srv.NewDB(t), b: srv.NewDB(t)}
	ep, err := couch.Probe(t.Context(), srv.AdminURL(), couch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.adb, p.bdb = ep.Server.DB(p.a), ep.Server.DB(p.b)
	p.load(t, p.a, fixture()...)
	p.load(t, p.b, fixture()...)
	return p
}

func (p *pairDB) load(t *testing.T, db string, docs ...json.RawMessage) {
	t.Helper()
	if _, err := p.srv.Client().BulkDocs(t.Context(), db, false, docs...); err != nil {
		t.Fatal(err)
	}
}

func (p *pairDB) compare(t *testing.T, opts verify.Options) *verify.Report {
	t.Helper()
	r, err := verify.Compare(t.Context(), p.adb, p.bdb, opts)
	if err != nil {
		t.Fatalf("compare: %v", err)
	}
	return r
}

// has reports whether r lists a difference of kind for id (and rev, when
// given).
func has(r *verify.Report, kind verify.Kind, id, rev string) bool {
	return slices.ContainsFunc(r.Differences, func(d verify.Difference) bool {
		return d.Kind == kind && d.ID == id && (rev == "" || d.Rev == rev)
	})
}

func dump(r *verify.Report) string {
	var b strings.Builder
	b.WriteString(r.String())
	for _, d := range r.Differences {
		b.WriteString("\n  " + d.String())
	}
	return b.String()
}

func TestCompare_EqualDatabases(t *testing.T) {
	p := newPair(t)
	sec := couchtest.Security{Admins: couchtest.Group{Names: []string{"x", "y"}}, Members: couchtest.Group{Roles: []string{"r"}}}
	for _, db := range []string{p.a, p.b} {
		if err := p.srv.Client().PutSecurity(t.Context(), db, sec); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []verify.Mode{verify.Cheap, verify.Full} {
		r := p.compare(t, verify.Options{Mode: mode, Metadata: true})
		if !r.Equal() {
			t.Errorf("%s: %s", mode, dump(r))
		}
		if r.Docs != 7 {
			t.Errorf("%s: docs = %d, want 7", mode, r.Docs)
		}
		if want := int64(0); mode == verify.Full {
			want = 9
			if r.Leaves != want {
				t.Errorf("full: leaves = %d, want %d", r.Leaves, want)
			}
		}
	}
}

// TestCompare_CopyByEngine checks that a copy made by the replication
// engine verifies as equal in full mode (with PouchDB Server's revpos).
func TestCompare_CopyByEngine(t *testing.T) {
	p := newPair(t)
	c := p.srv.NewDB(t)
	cdb := p.adb.Server().DB(c)
	if _, err := replicate.Run(t.Context(), p.adb, cdb, replicate.Options{CopyMetadata: true}); err != nil {
		t.Fatal(err)
	}
	r, err := verify.Compare(t.Context(), p.adb, cdb, verify.Options{Mode: verify.Full, Metadata: true, LenientRevpos: true})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal() {
		t.Errorf("copy differs: %s", dump(r))
	}
}

func TestCompare_DetectsDifferences(t *testing.T) {
	p := newPair(t)
	// missing docs: only in a (so doc_count differs too).
	p.load(t, p.a, raw(`{"_id":"only-a","_rev":"1-a"}`), raw(`{"_id":"only-a2","_rev":"1-a"}`))
	// extra doc: only in b.
	p.load(t, p.b, raw(`{"_id":"only-b","_rev":"1-a"}`))
	// extra leaf: a conflict only b holds.
	p.load(t, p.b, raw(`{"_id":"multi","_rev":"1-z","v":"z"}`))
	// different body under the same rev.
	p.load(t, p.a, raw(`{"_id":"body","_rev":"1-s","v":1}`))
	p.load(t, p.b, raw(`{"_id":"body","_rev":"1-s","v":2}`))
	// attachment with other bytes (so another digest) under the same rev.
	p.load(t, p.a, raw(`{"_id":"dig","_rev":"1-s","_attachments":{"f":{"content_type":"text/plain","data":%q}}}`, b64("one")))
	p.load(t, p.b, raw(`{"_id":"dig","_rev":"1-s","_attachments":{"f":{"content_type":"text/plain","data":%q}}}`, b64("two")))
	// security only on a.
	if err := p.srv.Client().PutSecurity(t.Context(), p.a, couchtest.Security{Members: couchtest.Group{Names: []string{"bob"}}}); err != nil {
		t.Fatal(err)
	}

	cheap := p.compare(t, verify.Options{Mode: verify.Cheap, Metadata: true})
	full := p.compare(t, verify.Options{Mode: verify.Full, Metadata: true})
	for name, r := range map[string]*verify.Report{"cheap": cheap, "full": full} {
		for _, c := range []struct {
			kind    verify.Kind
			id, rev string
		}{
			{verify.KindMissing, "only-a", ""},
			{verify.KindExtra, "only-b", ""},
			{verify.KindExtraRev, "multi", "1-z"},
			{verify.KindSecurity, "", ""},
			{verify.KindDocCount, "", ""},
		} {
			if !has(r, c.kind, c.id, c.rev) {
				t.Errorf("%s: no %s difference for %q %s:\n%s", name, c.kind, c.id, c.rev, dump(r))
			}
		}
	}
	if has(cheap, verify.KindBody, "body", "") || has(cheap, verify.KindAttachment, "dig", "") {
		t.Errorf("cheap mode compared contents:\n%s", dump(cheap))
	}
	if !has(full, verify.KindBody, "body", "1-s") {
		t.Errorf("full: body difference not found:\n%s", dump(full))
	}
	if !has(full, verify.KindAttachment, "dig", "1-s") {
		t.Errorf("full: attachment digest difference not found:\n%s", dump(full))
	}
	if full.Total != len(full.Differences) || full.Total != 8 {
		t.Errorf("full: total %d, listed %d, want 8:\n%s", full.Total, len(full.Differences), dump(full))
	}

	// AllowExtra forgives what only b holds, not what b lacks.
	lax := p.compare(t, verify.Options{Mode: verify.Full, AllowExtra: true})
	if has(lax, verify.KindExtra, "only-b", "") || has(lax, verify.KindExtraRev, "multi", "") || !has(lax, verify.KindMissing, "only-a", "") {
		t.Errorf("allow extra:\n%s", dump(lax))
	}

	// MaxDifferences caps the list, not the count.
	capped := p.compare(t, verify.Options{Mode: verify.Full, Metadata: true, MaxDifferences: 2})
	if len(capped.Differences) != 2 || capped.Total != full.Total || capped.Truncated() != full.Total-2 {
		t.Errorf("capped: listed %d of %d, want 2 of %d", len(capped.Differences), capped.Total, full.Total)
	}
}

func TestCompare_DeletedAndHistory(t *testing.T) {
	p := newPair(t)
	// same leaf rev, deleted on one side only.
	p.load(t, p.a, raw(`{"_id":"del","_rev":"1-q","v":1}`))
	p.load(t, p.b, raw(`{"_id":"del","_rev":"1-q","v":1,"_deleted":true}`))
	// same leaf, other ancestor.
	p.load(t, p.a, raw(`{"_id":"hist","_rev":"2-h","_revisions":{"start":2,"ids":["h","a"]}}`))
	p.load(t, p.b, raw(`{"_id":"hist","_rev":"2-h","_revisions":{"start":2,"ids":["h","b"]}}`))
	r := p.compare(t, verify.Options{Mode: verify.Full})
	if !has(r, verify.KindDeleted, "del", "") || !has(r, verify.KindDeleted, "del", "1-q") {
		t.Errorf("deleted state difference not found:\n%s", dump(r))
	}
	if !has(r, verify.KindHistory, "hist", "2-h") {
		t.Errorf("history difference not found:\n%s", dump(r))
	}
}

func TestCompare_MissingDatabase(t *testing.T) {
	p := newPair(t)
	r, err := verify.Compare(t.Context(), p.adb, p.adb.Server().DB("no-such-db-here"), verify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Equal() || r.Differences[0].Kind != verify.KindNoDatabase || !strings.Contains(r.Differences[0].Detail, "no-such-db-here") {
		t.Errorf("got %s, want a no_database difference naming no-such-db-here", dump(r))
	}
	// a missing, b there: the same difference the other way round
	r, err = verify.Compare(t.Context(), p.adb.Server().DB("no-such-db-here"), p.adb, verify.Options{})
	if err != nil || r.Equal() || r.Differences[0].Kind != verify.KindNoDatabase || !strings.Contains(r.Differences[0].Detail, "no-such-db-here") {
		t.Errorf("missing a: %v, %s; want a no_database difference naming no-such-db-here", err, dump(r))
	}
	if _, err := verify.Compare(t.Context(), p.adb.Server().DB("no-such-db-here"), p.adb.Server().DB("nor-this-one"), verify.Options{}); err == nil {
		t.Error("both missing: no error")
	}
}

// TestCompare_AllowExtraAcceptsLeavesBuiltOn (found by a new user: a
// restore with --reuse-existing --verify full over a document edited on
// the target since the backup reported the archive's revision missing):
// with AllowExtra, a leaf of a that b holds below a revision of its own
// is b holding more, not a difference; a leaf b holds nowhere still is.
func TestCompare_AllowExtraAcceptsLeavesBuiltOn(t *testing.T) {
	p := newPair(t)
	// b stored a's 1-a, then a 2-b of its own on it (as an edit does)
	p.load(t, p.a, raw(`{"_id":"built","_rev":"1-a","v":1}`))
	p.load(t, p.b, raw(`{"_id":"built","_rev":"1-a","v":1}`))
	p.load(t, p.b, raw(`{"_id":"built","_rev":"2-b","v":2,"_revisions":{"start":2,"ids":["b","a"]}}`))
	p.load(t, p.a, raw(`{"_id":"other","_rev":"1-x","v":1}`))
	p.load(t, p.b, raw(`{"_id":"other","_rev":"2-y","v":2,"_revisions":{"start":2,"ids":["y","w"]}}`))
	lax := p.compare(t, verify.Options{Mode: verify.Full, AllowExtra: true})
	if has(lax, verify.KindMissingRev, "built", "1-a") {
		t.Errorf("allow extra: a leaf b built on reported missing:\n%s", dump(lax))
	}
	if !has(lax, verify.KindMissingRev, "other", "1-x") || lax.Total != 1 {
		t.Errorf("allow extra: want only other's 1-x missing:\n%s", dump(lax))
	}
	strict := p.compare(t, verify.Options{Mode: verify.Full})
	if !has(strict, verify.KindMissingRev, "built", "1-a") {
		t.Errorf("strict: a leaf only in a not reported:\n%s", dump(strict))
	}
}
