package replicate_test

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/recproxy"
	"github.com/sofadb/sofa/replicate"
)

// sessionPair is a source and a target database on the shared server,
// each opened through a recording proxy of its own, so that the requests
// of each side are counted apart.
func sessionPair(t *testing.T) (srv *couchtest.Server, src, tgt string, sdb, tdb *couch.DB, srec, trec *recproxy.Proxy) {
	t.Helper()
	srv = couchtest.Shared(t)
	src, tgt = srv.NewDB(t), srv.NewDB(t)
	via := func() (*recproxy.Proxy, string) {
		rec := recproxy.Start(t, srv.AdminURL())
		u, _ := url.Parse(rec.URL)
		if srv.AdminUser != "" {
			u.User = url.UserPassword(srv.AdminUser, srv.AdminPassword)
		}
		return rec, u.String()
	}
	srec, su := via()
	trec, tu := via()
	return srv, src, tgt, openAt(t, su, src), openAt(t, tu, tgt), srec, trec
}

// kinds names the requests of ex (method and the path after the
// database), in order.
func kinds(ex []recproxy.Exchange, db string) []string {
	var out []string
	for _, e := range ex {
		p := strings.TrimPrefix(e.Path, "/"+couchtest.EscapeDB(db))
		if strings.HasPrefix(p, "/_local/") {
			p = "/_local"
		}
		out = append(out, e.Method+" "+p)
	}
	return out
}

// TestSession_PassCostsTheChangesOnly: after a Session's first pass (the
// initial copy) and its checkpoint, a pass over new documents sends one
// request to each side (`_changes` with the documents inline; `_bulk_docs`:
// no GET /db, no checkpoint read, no _revs_diff for a generation-1
// revision), a pass over an update adds `_revs_diff` and `_bulk_get`; no
// pass writes a checkpoint, Checkpoint writes one, once; a Session opened
// again (a restart) starts from it.
func TestSession_PassCostsTheChangesOnly(t *testing.T) {
	ctx := context.Background()
	srv, src, tgt, sdb, tdb, srec, trec := sessionPair(t)
	c := srv.Client()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := c.PutDoc(ctx, src, id, map[string]any{"v": id}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := replicate.Open(ctx, sdb, tdb, replicate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Pass(ctx)
	if err != nil || res.Stats.DocsWritten != 3 {
		t.Fatalf("first pass: %v, %+v", err, res)
	}
	if !s.Dirty() {
		t.Errorf("not dirty after a pass that wrote 3 documents")
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Dirty() || s.CheckpointedAt().IsZero() {
		t.Errorf("after Checkpoint: dirty %v, checkpointed at %v", s.Dirty(), s.CheckpointedAt())
	}

	srec.Reset()
	trec.Reset()
	for _, id := range []string{"d", "e"} {
		if _, err := c.PutDoc(ctx, src, id, map[string]any{"v": id}); err != nil {
			t.Fatal(err)
		}
	}
	res, err = s.Pass(ctx)
	if err != nil || res.Stats.DocsWritten != 2 || len(res.Failures) != 0 {
		t.Fatalf("pass over new documents: %v, %+v", err, res)
	}
	sk, tk := kinds(srec.Exchanges(), src), kinds(trec.Exchanges(), tgt)
	t.Logf("new documents: source %v, target %v", sk, tk)
	if len(sk) != 1 || sk[0] != "GET /_changes" || !strings.Contains(srec.Exchanges()[0].Query, "include_docs=true") {
		t.Errorf("a pass over 2 new documents asked the source %v (%v), want one _changes with include_docs", sk, srec.Exchanges())
	}
	if len(tk) != 1 || tk[0] != "POST /_bulk_docs" {
		t.Errorf("a pass over 2 new documents asked the target %v, want one _bulk_docs", tk)
	}
	if !s.Dirty() {
		t.Errorf("a pass wrote a checkpoint, or Dirty does not see it")
	}

	srec.Reset()
	trec.Reset()
	rev, err := c.PutDoc(ctx, src, "g1", map[string]any{"v": 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(ctx, src, "g1", map[string]any{"_rev": rev, "v": 2}); err != nil {
		t.Fatal(err)
	}
	res, err = s.Pass(ctx)
	if err != nil || res.Stats.DocsWritten != 1 {
		t.Fatalf("pass over an update: %v, %+v", err, res)
	}
	sk, tk = kinds(srec.Exchanges(), src), kinds(trec.Exchanges(), tgt)
	t.Logf("an update: source %v, target %v", sk, tk)
	if strings.Join(sk, ",") != "GET /_changes,POST /_bulk_get" || strings.Join(tk, ",") != "POST /_revs_diff,POST /_bulk_docs" {
		t.Errorf("a pass over a generation-2 revision: source %v, target %v; want _changes, _bulk_get; _revs_diff, _bulk_docs", sk, tk)
	}

	trec.Reset()
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if tk := kinds(trec.Exchanges(), tgt); len(tk) != 1 || tk[0] != "PUT /_local" {
		t.Errorf("two Checkpoints after a pass: target %v, want one PUT of the checkpoint", tk)
	}
	couchtest.AssertEqual(t, srv.DBURL(src), srv.DBURL(tgt), pouch)

	// A restart: a Session opened again resumes at the checkpoint.
	s2, err := replicate.Open(ctx, sdb, tdb, replicate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err = s2.Pass(ctx)
	if err != nil || res.Stats.ChangesRead != 0 || res.Stats.DocsWritten != 0 {
		t.Errorf("a Session opened again read %d changes, wrote %d (%v); want none", res.Stats.ChangesRead, res.Stats.DocsWritten, err)
	}
	if string(s2.Seq()) != string(s.Seq()) {
		t.Errorf("reopened at seq %s, the first session reached %s", s2.Seq().String(), s.Seq().String())
	}
}

// TestSession_FailuresHoldTheSeq: a revision the target refuses is listed
// in the pass's Failures and the seq reached stays before it; the next
// pass tries it again and reads on from where the last stopped (not
// again from the seq held), and once the target accepts it, copies it
// and moves on; a checkpoint never covers it meanwhile.
func TestSession_FailuresHoldTheSeq(t *testing.T) {
	ctx := context.Background()
	srv, src, tgt, sdb, tdb, _, _ := sessionPair(t)
	c := srv.Client()
	s, err := replicate.Open(ctx, sdb, tdb, replicate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	ddocRev, err := c.PutDoc(ctx, tgt, "_design/refuse", map[string]any{
		"validate_doc_update": `function(d){ if (d.bad) throw({forbidden: "bad document"}); }`})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ok1", "ok2"} {
		if _, err := c.PutDoc(ctx, src, id, map[string]any{"v": id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.PutDoc(ctx, src, "refused", map[string]any{"bad": true}); err != nil {
		t.Fatal(err)
	}
	before := s.Seq()
	res, err := s.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) != 1 || res.Failures[0].ID != "refused" || res.Failures[0].Error != "forbidden" {
		t.Fatalf("failures %v, want the refused document (forbidden)", res.Failures)
	}
	if string(s.Seq()) != string(before) || string(res.EndSeq) != string(before) {
		t.Errorf("seq reached %s (EndSeq %s) after a batch with a failure, want it held at %s", s.Seq().String(), res.EndSeq.String(), before.String())
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	// A pass while the target still refuses: the new document and one
	// retry of the refused one, not the feed since the seq held (ok1 and
	// ok2 again: each later pass would write the database's whole tail).
	if _, err := c.PutDoc(ctx, src, "ok3", map[string]any{"v": "ok3"}); err != nil {
		t.Fatal(err)
	}
	res, err = s.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.DocsWritten != 1 || res.Stats.ChangesRead != 2 || len(res.Failures) != 1 || res.Failures[0].ID != "refused" {
		t.Errorf("a pass after one with a refused revision wrote %d, read %d changes, failures %v; want ok3 written, 2 changes (ok3, the retry), the refused one again",
			res.Stats.DocsWritten, res.Stats.ChangesRead, res.Failures)
	}
	if string(s.Seq()) != string(before) {
		t.Errorf("seq reached %s after a second pass with the refusal, want it still held at %s", s.Seq().String(), before.String())
	}
	if _, err := c.Do(ctx, "DELETE", "/"+couchtest.EscapeDB(tgt)+"/_design/refuse?rev="+ddocRev, nil, nil); err != nil {
		t.Fatal(err)
	}
	res, err = s.Pass(ctx)
	if err != nil || len(res.Failures) != 0 || res.Stats.DocsWritten < 1 {
		t.Fatalf("the pass after the target accepts: %v, %+v", err, res)
	}
	if ids := allIDs(t, srv, tgt); !ids["refused"] || !ids["ok1"] || !ids["ok2"] || !ids["ok3"] {
		t.Errorf("target holds %v after the last pass", ids)
	}
	if string(s.Seq()) == string(before) {
		t.Errorf("seq reached still held at %s once every revision is copied", before.String())
	}
}

// TestSession_SourceRecreated: the source database deleted and created
// again with more documents than it had. With integer seqs (PouchDB
// Server) the seq reached would skip the new database's first changes:
// SourceRecreated says so (its anchor revision is gone, or its update_seq
// is behind). With CouchDB's clustered seqs a since taken from the old
// database's shards reads the new one from its beginning: a pass copies
// everything.
func TestSession_SourceRecreated(t *testing.T) {
	ctx := context.Background()
	srv, src, tgt, sdb, tdb, _, _ := sessionPair(t)
	c := srv.Client()
	put := func(ids ...string) {
		for _, id := range ids {
			if _, err := c.PutDoc(ctx, src, id, map[string]any{"v": id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("a", "b")
	s, err := replicate.Open(ctx, sdb, tdb, replicate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if gone, err := s.SourceRecreated(ctx, nil); err != nil || gone {
		t.Fatalf("SourceRecreated of the same database: %v, %v", gone, err)
	}
	if err := c.DeleteDB(ctx, src); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateDB(ctx, src); err != nil {
		t.Fatal(err)
	}
	put("n1", "n2", "n3", "n4")
	info, err := sdb.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := s.SourceRecreated(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	withInfo, _ := s.SourceRecreated(ctx, &info)
	t.Logf("seq reached %s; recreated: %v (with its info: %v)", s.Seq().String(), gone, withInfo)
	if _, err := strconv.Atoi(s.Seq().String()); err == nil {
		if !gone {
			t.Errorf("integer seqs: SourceRecreated did not see the recreation")
		}
		return
	}
	res, err := s.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		if !allIDs(t, srv, tgt)[id] {
			t.Errorf("a pass after the recreation (clustered seqs) did not copy %s (wrote %d)", id, res.Stats.DocsWritten)
		}
	}
}
