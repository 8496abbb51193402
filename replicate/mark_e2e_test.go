package replicate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/replicate"
)

// spyTarget records the writes a run sends to a couch.DB, in order:
// "write" (WriteDocs), "write+local" (WriteDocsWithLocal, when
// localWriter), "put <id>" (PutLocal). after, if set, runs after each
// write.
type spyTarget struct {
	*couch.DB
	mu    sync.Mutex
	ops   []string
	after func()
}

func (s *spyTarget) log(op string) {
	s.mu.Lock()
	s.ops = append(s.ops, op)
	s.mu.Unlock()
}

func (s *spyTarget) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ops...)
}

func (s *spyTarget) WriteDocs(ctx context.Context, docs []*replicate.Doc) ([]replicate.DocError, error) {
	s.log("write")
	f, err := s.DB.WriteDocs(ctx, docs)
	if s.after != nil {
		s.after()
	}
	return f, err
}

func (s *spyTarget) PutLocal(ctx context.Context, id string, body []byte) error {
	s.log("put " + strings.TrimPrefix(id, "_local/"))
	return s.DB.PutLocal(ctx, id, body)
}

// localSpy is a spyTarget that takes a `_local` document with a write.
type localSpy struct{ *spyTarget }

func (s localSpy) WriteDocsWithLocal(ctx context.Context, docs []*replicate.Doc, id string, body []byte) ([]replicate.DocError, bool, error) {
	s.log("write+local")
	f, stored, err := s.DB.WriteDocsWithLocal(ctx, docs, id, body)
	if s.after != nil {
		s.after()
	}
	return f, stored, err
}

// plainSpy hides every optional ability but LocalRevver: it cannot take
// a `_local` document with a write.
type plainSpy struct {
	replicate.Target
	spy *spyTarget
}

func (p plainSpy) LocalRev(id string) (string, bool) { return p.spy.LocalRev(id) }

// runInto is runOK into any target.
func runInto(t *testing.T, sdb *couch.DB, tgt replicate.Target, opts replicate.Options) *replicate.Result {
	t.Helper()
	res, err := replicate.Run(t.Context(), sdb, tgt, opts)
	if err != nil {
		t.Fatalf("replicate: %v", err)
	}
	if len(res.Failures) > 0 {
		t.Fatalf("unexpected failures: %v", res.Failures)
	}
	return res
}

// checkpointOn reads the replication's checkpoint on tdb.
func checkpointOn(t *testing.T, tdb *couch.DB, id string) (seq string, anchored bool) {
	t.Helper()
	b, err := tdb.GetLocal(t.Context(), "_local/"+id)
	if err != nil {
		t.Fatalf("checkpoint %s: %v", id, err)
	}
	var cp struct {
		Seq    json.RawMessage `json:"source_last_seq"`
		Anchor *struct{}       `json:"sofa_anchor"`
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		t.Fatal(err)
	}
	return string(cp.Seq), cp.Anchor != nil
}

// An Unclaimed copy of a small database into a database just created
// sends its mark (a checkpoint at seq 0, anchored) in its one
// `_bulk_docs` and writes no checkpoint at the end: no `_local` request
// at all. Its rerun resumes from the mark and writes nothing.
func TestUnclaimed_MarkRidesTheOneWrite(t *testing.T) {
	srv, src, _, sdb, tdb := pair(t)
	mustBulk(t, srv, src, true, raw(`{"_id":"a"}`), raw(`{"_id":"b"}`), raw(`{"_id":"c","_deleted":true}`))
	spy := &spyTarget{DB: tdb}
	res := runInto(t, sdb, localSpy{spy}, replicate.Options{Unclaimed: true, SourceReadOnly: true, TargetCreated: tdb.Created()})
	if got := strings.Join(spy.calls(), ","); got != "write+local" {
		t.Errorf("first run: writes %q, want one write+local and no PutLocal", got)
	}
	if res.Stats.Checkpoints != 0 || res.Stats.DocsWritten != 3 {
		t.Errorf("first run: %d checkpoints, %d written; want 0, 3", res.Stats.Checkpoints, res.Stats.DocsWritten)
	}
	if seq, anchored := checkpointOn(t, tdb, res.ReplicationID); seq != "0" || !anchored {
		t.Errorf("mark: source_last_seq %s, anchored %t; want 0, true", seq, anchored)
	}
	// The `_rev` the write gave it is known, so a checkpoint over it
	// needs no re-read.
	b, err := tdb.GetLocal(t.Context(), res.ReplicationID)
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Rev string `json:"_rev"`
	}
	json.Unmarshal(b, &stored)
	if rev, ok := tdb.LocalRev(res.ReplicationID); !ok || rev != stored.Rev {
		t.Errorf("LocalRev = %q, %t; the target holds %q", rev, ok, stored.Rev)
	}

	spy2 := &spyTarget{DB: tdb}
	res = runInto(t, sdb, localSpy{spy2}, replicate.Options{Unclaimed: true, SourceReadOnly: true})
	if got := spy2.calls(); len(got) != 0 || res.Stats.DocsWritten != 0 || res.StartSeq.String() != "0" {
		t.Errorf("rerun: writes %q, %d written, start seq %s; want none, 0, 0", got, res.Stats.DocsWritten, res.StartSeq)
	}
}

// Without a target that takes a `_local` document with a write, the
// mark is stored with PutLocal before the second write, never after it;
// a copy of more than one write keeps its final checkpoint.
func TestUnclaimed_MarkBeforeSecondWrite(t *testing.T) {
	srv, src, _, sdb, tdb := pair(t)
	var docs []json.RawMessage
	for i := range 5 {
		docs = append(docs, raw(`{"_id":"d%d"}`, i))
	}
	mustBulk(t, srv, src, true, docs...)
	spy := &spyTarget{DB: tdb}
	res := runInto(t, sdb, plainSpy{Target: spy, spy: spy}, replicate.Options{Unclaimed: true, SourceReadOnly: true,
		TargetCreated: tdb.Created(), WriteBatchDocs: 2})
	id := res.ReplicationID
	want := fmt.Sprintf("write,put %s,write,write,put %s", id, id)
	if got := strings.Join(spy.calls(), ","); got != want {
		t.Errorf("writes %q, want %q", got, want)
	}
	if seq, _ := checkpointOn(t, tdb, id); seq == "0" {
		t.Errorf("final checkpoint at seq %s, want the end of the feed", seq)
	}
}

// An Unclaimed run interrupted after its one write keeps its final
// checkpoint (only a complete run goes without).
func TestUnclaimed_InterruptedKeepsCheckpoint(t *testing.T) {
	srv, src, _, sdb, tdb := pair(t)
	mustBulk(t, srv, src, true, raw(`{"_id":"a"}`), raw(`{"_id":"b"}`))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	spy := &spyTarget{DB: tdb, after: cancel}
	res, err := replicate.Run(ctx, sdb, localSpy{spy}, replicate.Options{Unclaimed: true, SourceReadOnly: true, TargetCreated: tdb.Created()})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	want := "write+local,put " + res.ReplicationID
	if got := strings.Join(spy.calls(), ","); got != want || res.Stats.DocsWritten != 2 {
		t.Errorf("writes %q, %d written; want %q, 2", got, res.Stats.DocsWritten, want)
	}
	if seq, _ := checkpointOn(t, tdb, res.ReplicationID); seq == "0" {
		t.Errorf("checkpoint at seq %s after the interrupt, want the end of the feed", seq)
	}
}

// With NoCheckpoints no checkpoint is read or written, and the result's
// EndSeq is still the seq every write covers (the summary's "seq 0 ->
// N"), not the start.
func TestNoCheckpoints_EndSeqReached(t *testing.T) {
	srv, src, _, sdb, tdb := pair(t)
	var docs []json.RawMessage
	for i := range 7 {
		docs = append(docs, raw(`{"_id":"d%d"}`, i))
	}
	mustBulk(t, srv, src, true, docs...)
	spy := &spyTarget{DB: tdb}
	res := runInto(t, sdb, plainSpy{Target: spy, spy: spy}, replicate.Options{NoCheckpoints: true, BatchSize: 3})
	for _, c := range spy.calls() {
		if strings.HasPrefix(c, "put ") {
			t.Errorf("NoCheckpoints wrote %q", c)
		}
	}
	info, err := sdb.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// CouchDB's seqs are opaque beyond their number
	num := func(s string) string { n, _, _ := strings.Cut(s, "-"); return n }
	if res.Stats.DocsWritten != 7 || num(res.EndSeq.String()) != num(info.UpdateSeq.String()) {
		t.Errorf("%d written, end seq %s; want 7 and the source's update seq %s", res.Stats.DocsWritten, res.EndSeq, info.UpdateSeq)
	}
}
