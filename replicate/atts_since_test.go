package replicate_test

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/recproxy"
	"github.com/sofadb/sofa/replicate"
)

// TestAttachmentsTheTargetHolds adds conflicting leaves to documents
// whose attachment base.bin (revpos 1) the target already holds, then
// replicates again. Where the leaves are children of the target's leaf
// 1-x ("a"), base.bin never travels again: the target attaches the stubs
// from 1-x. A new attachment on a leaf, of unknown revpos (CouchDB keeps
// revpos 0 for one written with new_edits=false without revpos), still
// travels, and does not make the others travel. Where the target holds no
// body of any ancestor of the leaves ("b": children of 1-x, of which the
// target has only 2-y's history; "c": a new branch over 1-x), the bytes
// must travel (a target merges stubs only from a revision it has a body
// of): they are read once per document, not once per leaf, and sent at
// once: no stub the target refuses (412 missing_stub;
// CouchDB's _revs_diff counts the body-less 1-x as present) makes a
// revision be written twice. The copy is equal. Counted at recording
// proxies in front of both.
func TestAttachmentsTheTargetHolds(t *testing.T) {
	srv, src, tgt, _, _ := pair(t)
	base := make([]byte, 5000)
	rand.Read(base)
	sum := md5.Sum(base)
	stub := fmt.Sprintf(`"base.bin":{"stub":true,"revpos":1,"content_type":"application/octet-stream","length":%d,"digest":"md5-%s"}`, len(base), b64(sum[:]))
	doc := func(id, rev string, ids []string, atts string) json.RawMessage {
		hist, _ := json.Marshal(ids)
		return raw(`{"_id":%q,"_rev":%q,"_revisions":{"start":%d,"ids":%s},"_attachments":{%s}}`,
			id, rev, replicate.Generation(rev), hist, atts)
	}
	// a: 1-x; b and c: 2-y over 1-x. base.bin comes with 1-x.
	for _, id := range []string{"a", "b", "c"} {
		mustBulk(t, srv, src, false, raw(`{"_id":%q,"_rev":"1-x","_attachments":{"base.bin":{"content_type":"application/octet-stream","revpos":1,"data":%q}}}`, id, b64(base)))
	}
	for _, id := range []string{"b", "c"} {
		mustBulk(t, srv, src, false, doc(id, "2-y", []string{"y", "x"}, stub))
	}

	rec := recproxy.Start(t, srv.AdminURL())
	u, _ := url.Parse(rec.URL)
	u.User = url.UserPassword(srv.AdminUser, srv.AdminPassword)
	sdb := openAt(t, u.String(), src)
	trec := recproxy.Start(t, srv.AdminURL())
	tu, _ := url.Parse(trec.URL)
	tu.User = u.User
	tdb := openAt(t, tu.String(), tgt)
	// (alone or, on CouchDB, in one _bulk_get with the bytes inline)
	if first := runOK(t, sdb, tdb, replicate.Options{}); first.Stats.AttachmentsRead != 3 {
		t.Fatalf("first copy: base.bin read %d times, want 3", first.Stats.AttachmentsRead)
	}

	const n = 12
	var leaves []json.RawMessage
	for i := range n {
		h := fmt.Sprintf("c%02d", i)
		// a: children of 1-x, the target's leaf.
		leaves = append(leaves, doc("a", "2-"+h, []string{h, "x"}, stub))
		// b: children of 1-x, an ancestor of the target's leaf 2-y.
		leaves = append(leaves, doc("b", "2-"+h, []string{h, "x"}, stub))
		// c: a new branch over 1-x, deeper than the target's leaf 2-y.
		leaves = append(leaves, doc("c", "3-"+h, []string{h, "n" + h, "x"}, stub))
	}
	mustBulk(t, srv, src, false, leaves...)
	// One leaf that also brings an attachment of its own.
	mustBulk(t, srv, src, false, doc("a", "3-new", []string{"new", "c00", "x"},
		stub+fmt.Sprintf(`,"new.txt":{"content_type":"text/plain","data":%q}`, b64([]byte("fresh")))))

	rec.Reset()
	trec.Reset()
	res := runOK(t, sdb, tdb, replicate.Options{})
	couchtest.AssertEqual(t, srv.DBURL(src), srv.DBURL(tgt), pouch)
	var baseGets, newGets int
	var paths []string
	otherGets := map[string]int{}
	for _, e := range rec.Exchanges() {
		if e.Method == "GET" && strings.HasSuffix(e.Path, "/base.bin") {
			for _, id := range []string{"b", "c"} {
				if strings.HasSuffix(e.Path, "/"+id+"/base.bin") {
					otherGets[id]++
				}
			}
		}
		switch {
		case e.Method != "GET" || !strings.Contains(e.Path, "/a/"):
		case strings.HasSuffix(e.Path, "/base.bin"):
			baseGets++
			paths = append(paths, e.Path+"?"+e.Query)
		case strings.HasSuffix(e.Path, "/new.txt"):
			newGets++
		}
	}
	if baseGets != 0 {
		t.Errorf("a's base.bin, which the target holds, read %d more times: %s", baseGets, strings.Join(paths, " "))
	}
	if newGets != 1 {
		t.Errorf("a's new.txt read %d times, want 1", newGets)
	}
	// The leaves of b and of c share one base.bin each: read once.
	if otherGets["b"] != 1 || otherGets["c"] != 1 {
		t.Errorf("base.bin of b read %d times, of c %d times; want once each for their %d leaves", otherGets["b"], otherGets["c"], n)
	}
	// No stub is sent where the target cannot attach it.
	for _, e := range trec.Exchanges() {
		if e.Status == 412 {
			t.Errorf("target answered %s %s with %d: a stub it lacks was sent, the revision written again", e.Method, e.Path, e.Status)
		}
	}
	if want := int64(3 * n); res.Stats.DocsWritten != want { // a/2-c00 is no leaf
		t.Errorf("docs_written %d, want %d", res.Stats.DocsWritten, want)
	}
}
