package replicate

import "testing"

// Checkpoint ids are pinned: a change of the derivation would orphan
// every checkpoint written by earlier versions (each run would copy from
// the beginning). The expected ids are literals, not computed here.
func TestReplicationIDPinned(t *testing.T) {
	for _, c := range []struct {
		src, tgt string
		opts     []string
		want     string
	}{
		{"a8c5d0e1f2/orders", "http://127.0.0.1:5984/orders-copy", nil, "fb703ec3f23f22279ef294343c56547a"},
		{"a8c5d0e1f2/orders", "http://127.0.0.1:5984/orders-copy", []string{"filter=_design/app/live"}, "951ba3459417156404ff2f64c3ec7012"},
	} {
		if got := ReplicationID(c.src, c.tgt, c.opts...); got != c.want {
			t.Errorf("ReplicationID(%q, %q, %q) = %s, want %s", c.src, c.tgt, c.opts, got, c.want)
		}
	}
	// direction and options matter
	if ReplicationID("a/x", "b/y") == ReplicationID("b/y", "a/x") {
		t.Error("source and target swapped give the same id")
	}
}
