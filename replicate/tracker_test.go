package replicate

import "testing"

// TestTracker_StuckForgets: the acknowledged prefix stops at a batch with
// failures, the finished prefix goes on, and the batches both passed are
// not remembered (a continuous run goes on for days after one failure:
// its memory must not grow).
func TestTracker_StuckForgets(t *testing.T) {
	tr := newTracker()
	tr.started(0, Seq("1"), nil)
	tr.started(1, Seq("2"), nil)
	tr.done(0, false)
	tr.done(1, true)
	if string(tr.through()) != "1" || !tr.held() {
		t.Fatalf("through %s held %v, want 1 and held", tr.through(), tr.held())
	}
	for n := int64(2); n < 1002; n++ {
		tr.started(n, Seq("x"), nil)
		tr.done(n, false)
	}
	if string(tr.through()) != "1" {
		t.Errorf("through %s after a failed batch, want 1", tr.through())
	}
	if string(tr.readThrough()) != "x" || !tr.prefixDone(1002) {
		t.Errorf("read through %s (every batch finished: %v), want x and true", tr.readThrough(), tr.prefixDone(1002))
	}
	if len(tr.seqs)+len(tr.fin)+len(tr.failed) != 0 {
		t.Errorf("after the prefix stopped the tracker holds %d seqs, %d finished, %d failed; want none", len(tr.seqs), len(tr.fin), len(tr.failed))
	}
}
