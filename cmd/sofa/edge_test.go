package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// Defects met by a new user on CouchDB 3.5 (copy engine and verify), end
// to end through the sofa binary.

// zeroDocs are documents with zero-byte attachments of several content
// types (CouchDB stores text/* gzip-compressible types encoded), one also
// carrying a non-empty attachment, among plain documents.
func zeroDocs() []json.RawMessage {
	return []json.RawMessage{
		arRaw(`{"_id":"z-text","_attachments":{"f":{"content_type":"text/plain","data":""}}}`),
		arRaw(`{"_id":"z-bin","_attachments":{"f":{"content_type":"application/octet-stream","data":""}}}`),
		arRaw(`{"_id":"z-json","_attachments":{"f":{"content_type":"application/json","data":""},"g":{"content_type":"text/plain","data":%q}}}`, b64([]byte("not empty"))),
		arRaw(`{"_id":"p1","n":1}`),
		arRaw(`{"_id":"p2","n":2}`),
	}
}

// Zero-length attachments copy into CouchDB (from CouchDB and from
// PouchDB Server, db and server copies) and back up/restore equal.
func TestEdge_ZeroLengthAttachments(t *testing.T) {
	bin := sofaBin(t)
	couch := couchtest.StartKind(t, couchtest.CouchDB)
	pouch := couchtest.StartKind(t, couchtest.PouchDB)
	arCreate(t, couch, "zero", true, zeroDocs()...)
	arCreate(t, pouch, "zero", true, zeroDocs()...)

	for _, src := range []*couchtest.Server{couch, pouch} {
		t.Run(string(src.Kind), func(t *testing.T) {
			// one database
			tgt := couchtest.StartKind(t, couchtest.CouchDB)
			r := arSofa(t, bin, nil, "replicate", src.DBURL("zero"), tgt.DBURL("zero"), "--create-target")
			r.want(t, exitOK)
			edgeEqual(t, src, "zero", tgt, "zero")
			// whole server
			tgt2 := couchtest.StartKind(t, couchtest.CouchDB)
			r = arSofa(t, bin, nil, "replicate", src.URL, tgt2.URL, "--json")
			r.want(t, exitOK)
			if s := r.summary(t); s.DocsWritten < 5 {
				t.Errorf("server copy wrote %d documents, want at least 5", s.DocsWritten)
			}
			edgeEqual(t, src, "zero", tgt2, "zero")
			// backup and restore
			path := filepath.Join(t.TempDir(), "zero.sofa")
			arSofa(t, bin, nil, "backup", src.DBURL("zero"), path).want(t, exitOK)
			tgt3 := couchtest.StartKind(t, couchtest.CouchDB)
			arSofa(t, bin, nil, "restore", path, tgt3.URL).want(t, exitOK)
			edgeEqual(t, src, "zero", tgt3, "zero")
		})
	}
}

// edgeEqual compares db on src with db2 on tgt (_security included); for
// servers of different kinds the attachment digests are not compared (the
// bytes are).
func edgeEqual(t *testing.T, src *couchtest.Server, db string, tgt *couchtest.Server, db2 string) {
	t.Helper()
	d, err := couchtest.CompareDBs(t.Context(), src.DBURL(db), tgt.DBURL(db2),
		couchtest.CompareOptions{PouchDBRevpos: true, Security: true, RevsLimit: true, DigestsByKind: src.Kind != tgt.Kind})
	if err != nil {
		t.Fatalf("compare %s with %s: %v", db, db2, err)
	}
	if !d.Equal() {
		t.Errorf("%s -> %s: %s", db, db2, d)
	}
}

// A revision whose attachment goes as a stub the target cannot resolve
// (the target holds the ancestor, but without that attachment) makes
// CouchDB refuse the whole _bulk_docs with 412 missing_stub, after a
// clustered database may have stored part of it. The batch is split, that
// revision is written again with its bytes, and docs_written counts what
// was written.
func TestEdge_MissingStubBatch(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	arCreate(t, srv, "src", true, arSmallDocs("p", 40)...)
	arWrite(t, srv, "src", false, arRaw(`{"_id":"s","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"_attachments":{"f":{"content_type":"application/octet-stream","revpos":1,"data":%q}}}`, b64([]byte("bytes of f"))))
	arCreate(t, srv, "tgt", false, arRaw(`{"_id":"s","_rev":"1-a","_revisions":{"start":1,"ids":["a"]}}`))
	r := arSofa(t, bin, nil, "replicate", srv.DBURL("src"), srv.DBURL("tgt"), "--json")
	r.want(t, exitOK)
	var res resultDoc
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("output is not JSON (%v):\n%s", err, r.stdout)
	}
	if res.Stats.DocsWritten != 41 || res.Stats.DocWriteFailures != 0 {
		t.Errorf("docs_written=%d doc_write_failures=%d, want 41 and 0", res.Stats.DocsWritten, res.Stats.DocWriteFailures)
	}
	couchtest.AssertEqual(t, srv.DBURL("src"), srv.DBURL("tgt"), couchtest.CompareOptions{PouchDBRevpos: true})
}

// surrogateDocs are 7 documents, one holding an escaped lone surrogate
// (PouchDB Server accepts it; CouchDB refuses it as invalid UTF-8).
func surrogateDocs() []json.RawMessage {
	docs := arSmallDocs("ok", 6)
	return append(docs, arRaw(`{"_id":"bad","s":"x\ud800y"}`))
}

// A lone surrogate in one body is carried byte for byte where the target
// takes it (PouchDB Server, an archive), and where it does not (CouchDB)
// that one revision is reported with its id, rev and reason while the
// others are copied, at once (a parse failure is not retried).
func TestEdge_LoneSurrogate(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.StartKind(t, couchtest.PouchDB)
	arCreate(t, src, "sur", true, surrogateDocs()...)
	badRaw := func(srv *couchtest.Server, db string) string {
		t.Helper()
		var body json.RawMessage
		if err := srv.Client().GetJSON(t.Context(), "/"+db+"/bad", &body); err != nil {
			t.Fatalf("%s/bad: %v", db, err)
		}
		return string(body)
	}
	if !strings.Contains(badRaw(src, "sur"), `\ud800`) {
		t.Fatalf("source does not hold the lone surrogate: %s", badRaw(src, "sur"))
	}

	// PouchDB Server -> PouchDB Server: carried as is.
	pt := couchtest.StartKind(t, couchtest.PouchDB)
	t0 := time.Now()
	arSofa(t, bin, nil, "replicate", src.DBURL("sur"), pt.DBURL("sur"), "--create-target").want(t, exitOK)
	if b := badRaw(pt, "sur"); !strings.Contains(b, `\ud800`) {
		t.Errorf("target body lost the lone surrogate: %s", b)
	}
	edgeEqual(t, src, "sur", pt, "sur")

	// PouchDB Server -> CouchDB: that revision is reported, the 6 others copied.
	ct := couchtest.StartKind(t, couchtest.CouchDB)
	r := arSofa(t, bin, nil, "replicate", src.DBURL("sur"), ct.DBURL("sur"), "--create-target", "--json")
	r.want(t, exitPartial)
	var res resultDoc
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("output is not JSON (%v):\n%s", err, r.stdout)
	}
	if res.Stats.DocsWritten != 6 || len(res.Failures) != 1 || res.Failures[0].ID != "bad" || !strings.HasPrefix(res.Failures[0].Rev, "1-") || res.Failures[0].Reason == "" {
		t.Errorf("docs_written=%d failures=%+v, want 6 and the one revision of bad", res.Stats.DocsWritten, res.Failures)
	}
	if n := arDocCount(t, ct, "sur"); n != 6 {
		t.Errorf("CouchDB target holds %d documents, want 6", n)
	}

	// backup, verify, restore: carried as is.
	path := filepath.Join(t.TempDir(), "sur.sofa")
	arSofa(t, bin, nil, "backup", src.DBURL("sur"), path).want(t, exitOK)
	arSofa(t, bin, nil, "verify", path).want(t, exitOK)
	rt := couchtest.StartKind(t, couchtest.PouchDB)
	arSofa(t, bin, nil, "restore", path, rt.URL).want(t, exitOK)
	if b := badRaw(rt, "sur"); !strings.Contains(b, `\ud800`) {
		t.Errorf("restored body lost the lone surrogate: %s", b)
	}
	edgeEqual(t, src, "sur", rt, "sur")
	// None of this waited on retries.
	if took := time.Since(t0); took > 90*time.Second {
		t.Errorf("took %v: a parse failure was retried", took)
	}
}

// An archive whose backup did not hold everything (a revision could not
// be read: the backup exits 3) is not called sound by verify.
func TestEdge_VerifyIncompleteArchive(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	// The attachment is larger than a batched read takes (64 KiB on
	// CouchDB): it is read alone, by the GET the proxy refuses.
	arCreate(t, src, "db", true, append(arSmallDocs("d", 5),
		arRaw(`{"_id":"att","_attachments":{"a.bin":{"content_type":"application/octet-stream","data":%q}}}`, b64([]byte(strings.Repeat("attachment bytes ", 6000)))))...)
	px := faultproxy.StartT(t, src.URL)
	if err := px.SetRules(faultproxy.Rule{Name: "gone", Method: "GET", Path: `^/db/att/a\.bin$`, Fault: faultproxy.Status, Status: 404}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "part.sofa")
	arSofa(t, bin, nil, "backup", px.URL+"/db", path).want(t, exitPartial)
	r := arSofa(t, bin, nil, "verify", path)
	r.want(t, exitPartial)
	if !strings.Contains(r.stderr, `id "att"`) || !strings.Contains(r.stderr, "incomplete") {
		t.Errorf("verify does not say what is missing:\n%s", r.stderr)
	}
}

// A changes feed that is complete but not JSON is not a transient fault:
// sofa stops at once with one clear line instead of asking again.
func TestEdge_MalformedFeedNotRetried(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	arCreate(t, srv, "src", true, arSmallDocs("d", 3)...)
	px := faultproxy.StartT(t, srv.URL)
	if err := px.SetRules(faultproxy.Rule{Name: "bad", Method: "GET", Path: `^/src/_changes$`, Fault: faultproxy.Status, Status: 200,
		Body: `{"results":[{"seq":"1","id":"a","changes":[{"rev":"1-a"}]} oops ],"last_seq":"1"}`}); err != nil {
		t.Fatal(err)
	}
	r := arSofa(t, bin, nil, "replicate", px.URL+"/src", srv.DBURL("tgt"), "--create-target")
	r.want(t, exitFatal)
	if !strings.Contains(r.errLine(t), "malformed") {
		t.Errorf("last line does not say the answer is malformed:\n%s", r.stderr)
	}
	if n := px.Stats().Rules["bad"].Fired; n != 1 {
		t.Errorf("the malformed feed was asked %d times, want 1", n)
	}
}

// A --create-target copy killed after some documents and run again sets
// the target's _security (the rerun finds the database it created).
func TestEdge_CreateTargetRerunSetsSecurity(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	arCreate(t, srv, "src", true, arSmallDocs("d", 3000)...)
	sec := couchtest.Security{Admins: couchtest.Group{Names: []string{"ann"}, Roles: []string{"ops"}}, Members: couchtest.Group{Names: []string{"bob"}, Roles: []string{"staff"}}}
	if err := srv.Client().PutSecurity(t.Context(), "src", sec); err != nil {
		t.Fatal(err)
	}
	px := faultproxy.StartT(t, srv.URL)
	if err := px.SetRules(faultproxy.Rule{Fault: faultproxy.Forward, Delay: 30 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	args := []string{"replicate", px.URL + "/src", px.URL + "/tgt", "--create-target", "--quiet", "--batch-size", "50", "--workers", "2"}
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Kill it once the target holds some documents.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for partial := false; !partial; {
		select {
		case err := <-exited:
			t.Fatalf("the copy ended before it could be killed: %v", err)
		case <-tick.C:
			var info struct {
				DocCount int64 `json:"doc_count"`
			}
			if err := srv.Client().GetJSON(t.Context(), "/tgt", &info); err == nil && info.DocCount > 0 {
				partial = info.DocCount < 3000
				if !partial {
					t.Fatalf("the copy finished before it could be killed")
				}
			}
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	if err := px.SetRules(); err != nil {
		t.Fatal(err)
	}
	arSofa(t, bin, nil, args...).want(t, exitOK)
	arEqual(t, srv, "src", srv, "tgt") // _security included
}

// A target account that is a member, not an admin, of the target
// database: setting _revs_limit and _security is refused (CouchDB answers
// the _revs_limit PUT with a 500 wrapping "forbidden"). That is permanent:
// each is reported once as a warning, at once, and every document the
// account may write is copied (design documents are refused to members,
// each reported).
func TestEdge_MemberTargetAccount(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "CouchDB's member/admin split and its answers to a member")
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "app", true, append(arSmallDocs("d", 20), arRaw(`{"_id":"_design/v","views":{}}`))...)
	if err := src.Client().PutSecurity(t.Context(), "app", couchtest.Security{Members: couchtest.Group{Names: []string{"ann"}, Roles: []string{}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Client().Do(t.Context(), "PUT", "/app/_revs_limit", 500, nil); err != nil {
		t.Fatal(err)
	}
	tgt := memberTarget(t)
	t0 := time.Now()
	u := tgt.UserURL("bob", "pw") + "/app"
	r := arSofa(t, bin, nil, "replicate", src.DBURL("app"), u, "--copy-security", "--json")
	r.want(t, exitPartial)
	if took := time.Since(t0); took > 60*time.Second {
		t.Errorf("took %v: a permission error was retried as transient", took)
	}
	var res resultDoc
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("output is not JSON (%v):\n%s", err, r.stdout)
	}
	if res.Stats.DocsWritten != 20 || len(res.Failures) != 1 || res.Failures[0].ID != "_design/v" {
		t.Errorf("docs_written=%d failures=%+v, want 20 and _design/v", res.Stats.DocsWritten, res.Failures)
	}
	w := strings.Join(res.Warnings, "\n")
	if !strings.Contains(w, "_revs_limit") || !strings.Contains(w, "_security") || strings.Contains(w, "pw@") {
		t.Errorf("warnings do not name _revs_limit and _security (or leak credentials):\n%s", w)
	}
	if n := arDocCount(t, tgt, "app"); n != 20 {
		t.Errorf("target holds %d documents, want 20", n)
	}
}

// memberTarget starts a server holding database app, of which user bob
// (password pw) is a member, not an admin.
func memberTarget(t *testing.T) *couchtest.Server {
	t.Helper()
	tgt := couchtest.Start(t)
	if err := tgt.Client().CreateDB(t.Context(), "app"); err != nil {
		t.Fatal(err)
	}
	if err := tgt.Client().CreateUser(t.Context(), "bob", "pw"); err != nil {
		t.Fatal(err)
	}
	if err := tgt.Client().PutSecurity(t.Context(), "app", couchtest.Security{Members: couchtest.Group{Names: []string{"bob"}, Roles: []string{}}}); err != nil {
		t.Fatal(err)
	}
	return tgt
}

// A member's refused `_revs_limit` PUT is no loss when the target already
// has the source's value (both at CouchDB's default here): no warning for
// it, while the refused _security is still reported.
func TestEdge_MemberTargetSameRevsLimit(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "CouchDB's member/admin split and its answers to a member")
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "app", true, arSmallDocs("d", 5)...)
	if err := src.Client().PutSecurity(t.Context(), "app", couchtest.Security{Members: couchtest.Group{Names: []string{"ann"}, Roles: []string{}}}); err != nil {
		t.Fatal(err)
	}
	tgt := memberTarget(t)
	r := arSofa(t, bin, nil, "replicate", src.DBURL("app"), tgt.UserURL("bob", "pw")+"/app", "--copy-security", "--json")
	var res resultDoc
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("output is not JSON (%v):\n%s\n%s", err, r.stdout, r.stderr)
	}
	w := strings.Join(res.Warnings, "\n")
	if strings.Contains(w, "_revs_limit") || !strings.Contains(w, "_security") {
		t.Errorf("warnings should name _security only (the target's _revs_limit is already 1000):\n%s", w)
	}
	if res.Stats.DocsWritten != 5 {
		t.Errorf("docs_written=%d, want 5", res.Stats.DocsWritten)
	}
	// A refused _security PUT is no loss either when the target already
	// holds the source's _security: no warning at all, exit 0.
	if err := src.Client().PutSecurity(t.Context(), "app", couchtest.Security{Members: couchtest.Group{Names: []string{"bob"}, Roles: []string{}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Client().PutDoc(t.Context(), "app", "more", map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	r = arSofa(t, bin, nil, "replicate", src.DBURL("app"), tgt.UserURL("bob", "pw")+"/app", "--copy-security", "--json")
	res = resultDoc{}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("output is not JSON (%v):\n%s\n%s", err, r.stdout, r.stderr)
	}
	if r.code != exitOK || len(res.Warnings) > 0 || res.Stats.DocsWritten != 1 {
		t.Errorf("the target's _security already the source's: exit %d, warnings %q, docs_written %d; want 0, none, 1", r.code, res.Warnings, res.Stats.DocsWritten)
	}
}

// The same attachment bytes get different digests on CouchDB (md5 of the
// gzip bytes it stores for text types) and PouchDB Server (md5 of the
// plain bytes): verify --full compares the content, so copies both ways
// verify equal, and a real difference in the bytes is still reported.
func TestEdge_VerifyDigestsAcrossKinds(t *testing.T) {
	bin := sofaBin(t)
	couch := couchtest.StartKind(t, couchtest.CouchDB)
	pouch := couchtest.StartKind(t, couchtest.PouchDB)
	text := []byte(strings.Repeat("the same few kilobytes of text\n", 150))
	// The integer has more digits than a double holds: PouchDB Server
	// keeps it rounded, which verify accepts against it.
	doc := arRaw(`{"_id":"t","big":12345678901234567891,"_attachments":{"note.txt":{"content_type":"text/plain","data":%q}}}`, b64(text))
	arCreate(t, couch, "a", true, doc)
	arCreate(t, pouch, "a", true, doc)
	for _, c := range []struct{ src, tgt *couchtest.Server }{{couch, pouch}, {pouch, couch}} {
		arSofa(t, bin, nil, "replicate", c.src.DBURL("a"), c.tgt.DBURL("b"), "--create-target").want(t, exitOK)
		arSofa(t, bin, nil, "verify", "--full", c.src.DBURL("a"), c.tgt.DBURL("b")).want(t, exitOK)
		arSofa(t, bin, nil, "verify", "--full", c.tgt.DBURL("b"), c.src.DBURL("a")).want(t, exitOK)
	}
	// Same revision, different bytes.
	diff := func(s string) json.RawMessage {
		return arRaw(`{"_id":"d","_rev":"1-x","_attachments":{"f.txt":{"content_type":"text/plain","revpos":1,"data":%q}}}`, b64([]byte(strings.Repeat(s, 300))))
	}
	arWrite(t, couch, "a", false, diff("one "))
	arWrite(t, pouch, "b", false, diff("two "))
	r := arSofa(t, bin, nil, "verify", "--full", couch.DBURL("a"), pouch.DBURL("b"))
	r.want(t, exitDifferent)
	if !strings.Contains(r.stdout+r.stderr, "f.txt") {
		t.Errorf("the difference does not name the attachment:\n%s\n%s", r.stdout, r.stderr)
	}
}

// CouchDB keeps integers beyond 2^53 exactly: verify --full tells two
// copies apart that differ only in one (server to server, and archive to
// server), and finds an exact copy equal.
func TestEdge_VerifyBigIntegers(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "CouchDB keeps integers beyond 2^53 exactly (PouchDB Server holds doubles)")
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	doc := func(n string) json.RawMessage {
		return arRaw(`{"_id":"i","_rev":"1-a","n":%s,"deep":{"list":[1,%s]}}`, n, n)
	}
	arCreate(t, srv, "src", false, doc("9007199254740993"))
	arCreate(t, srv, "same", false, doc("9007199254740993"))
	arCreate(t, srv, "off", false, doc("9007199254740992"))
	arSofa(t, bin, nil, "verify", "--full", srv.DBURL("src"), srv.DBURL("same")).want(t, exitOK)
	r := arSofa(t, bin, nil, "verify", "--full", srv.DBURL("src"), srv.DBURL("off"))
	r.want(t, exitDifferent)
	if !strings.Contains(r.stdout+r.stderr, "9007199254740992") {
		t.Errorf("the difference does not show the number:\n%s\n%s", r.stdout, r.stderr)
	}
	path := filepath.Join(t.TempDir(), "n.sofa")
	arSofa(t, bin, nil, "backup", srv.DBURL("src"), path).want(t, exitOK)
	arSofa(t, bin, nil, "verify", "--full", path, srv.DBURL("same")).want(t, exitOK)
	arSofa(t, bin, nil, "verify", "--full", path, srv.DBURL("off")).want(t, exitDifferent)
}

// verify --full compares each leaf's _revisions history: a target
// revision with 1 ancestor entry where the source has 5 (both under the
// default _revs_limit) is a difference.
func TestEdge_VerifyHistoryLength(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	arCreate(t, srv, "src", false, arRaw(`{"_id":"h","_rev":"5-e","v":1,"_revisions":{"start":5,"ids":["e","d","c","b","a"]}}`))
	arSofa(t, bin, nil, "replicate", srv.DBURL("src"), srv.DBURL("full"), "--create-target").want(t, exitOK)
	arSofa(t, bin, nil, "verify", "--full", srv.DBURL("src"), srv.DBURL("full")).want(t, exitOK)
	arCreate(t, srv, "short", false, arRaw(`{"_id":"h","_rev":"5-e","v":1,"_revisions":{"start":5,"ids":["e"]}}`))
	r := arSofa(t, bin, nil, "verify", "--full", srv.DBURL("src"), srv.DBURL("short"))
	r.want(t, exitDifferent)
	if !strings.Contains(r.stdout+r.stderr, "history") {
		t.Errorf("the difference does not name the history:\n%s\n%s", r.stdout, r.stderr)
	}
}

// A restore by a member (not an admin) of the target database cannot
// write its design documents: each is reported (exit 3), none is hidden
// by a checkpoint written past it, and a rerun reports it again.
func TestEdge_MemberRestoreDesignRefused(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "CouchDB's member/admin split and its answers to a member")
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "app", true, append(arSmallDocs("d", 5), arRaw(`{"_id":"_design/v","views":{"all":{"map":"function(d){emit(d._id)}"}}}`))...)
	arch := filepath.Join(t.TempDir(), "app.sofa")
	if r := arSofa(t, bin, nil, "backup", src.DBURL("app"), arch); r.code != 0 {
		t.Fatalf("backup: exit %d\n%s", r.code, r.stderr)
	}
	tgt := memberTarget(t)
	for run := 1; run <= 2; run++ {
		r := arSofa(t, bin, nil, "restore", arch, tgt.UserURL("bob", "pw")+"/app", "--reuse-existing")
		if r.code != 3 || !strings.Contains(r.stderr, `not copied: id="_design/v"`) {
			t.Errorf("restore run %d by a member: exit %d, want 3 naming _design/v\n%s", run, r.code, r.stderr)
		}
	}
	if n := arDocCount(t, tgt, "app"); n != 5 {
		t.Errorf("target holds %d documents, want the 5 others", n)
	}
}

// A member's `_security` PUT with no `_revs_limit` PUT before it (the
// source, PouchDB Server, has none): CouchDB answers it 500 no_majority,
// which a cluster also answers when nodes are down and was retried for
// the whole retry time (about 2 minutes), then the database failed with
// a message that did not name the account's rights. The account's rights
// are read on that answer: the refusal is a warning at once.
func TestEdge_MemberTargetSecurityNoMajority(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.StartKind(t, couchtest.PouchDB)
	arCreate(t, src, "app", true, arSmallDocs("d", 5)...)
	if err := src.Client().PutSecurity(t.Context(), "app", couchtest.Security{Members: couchtest.Group{Names: []string{"ann"}, Roles: []string{}}}); err != nil {
		t.Fatal(err)
	}
	tgt := couchtest.StartKind(t, couchtest.CouchDB)
	if err := tgt.Client().CreateDB(t.Context(), "app"); err != nil {
		t.Fatal(err)
	}
	if err := tgt.Client().CreateUser(t.Context(), "bob", "pw"); err != nil {
		t.Fatal(err)
	}
	if err := tgt.Client().PutSecurity(t.Context(), "app", couchtest.Security{Members: couchtest.Group{Names: []string{"bob"}, Roles: []string{}}}); err != nil {
		t.Fatal(err)
	}
	r := arSofa(t, bin, nil, "replicate", src.DBURL("app"), tgt.UserURL("bob", "pw")+"/app", "--copy-security", "--json", "--retry-time", "20s")
	var res resultDoc
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("output is not JSON (%v):\n%s\n%s", err, r.stdout, r.stderr)
	}
	w := strings.Join(res.Warnings, "\n")
	if !strings.Contains(w, "_security") || !strings.Contains(w, "not an admin of the database") || strings.Contains(r.stderr, "attempts") {
		t.Errorf("warnings should say _security was refused, the account not being an admin (exit %d):\n%s\n%s", r.code, w, r.stderr)
	}
	if res.Stats.DocsWritten != 5 {
		t.Errorf("docs_written=%d, want 5", res.Stats.DocsWritten)
	}
}
