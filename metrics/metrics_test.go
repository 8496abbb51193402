package metrics

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func gathered(t *testing.T, s *Set, name, db string) float64 {
	t.Helper()
	fams, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			got := ""
			for _, l := range m.Label {
				if l.GetName() == "db" {
					got = l.GetValue()
				}
			}
			if got != db {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("no %s{db=%q}", name, db)
	return 0
}

// TestDB_CountsOnce: what the Observer reported during a run is not
// counted again by EndRun, what it did not report is; checkpoints give
// the seq's numeric prefix; a failed run sets the state and error.
func TestDB_CountsOnce(t *testing.T) {
	s := New()
	d := s.DB("a")
	d.BeginRun(true)
	d.ChangesSeen(4, 2)
	d.BatchWritten(3, 1, 40*time.Millisecond)
	d.Checkpointed("7-g1AAA")
	d.EndRun(5, 3, 1, "", time.Now().Add(-time.Second), nil)
	for name, want := range map[string]float64{"sofa_db_changes_seen_total": 5, "sofa_db_docs_written_total": 3,
		"sofa_db_doc_write_failures_total": 1, "sofa_db_checkpoint_seq": 7, "sofa_db_pending_changes": 2} {
		if got := gathered(t, s, name, "a"); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// An engine that tells the Observer nothing: EndRun counts it all.
	d.BeginRun(true)
	d.EndRun(2, 2, 0, "9", time.Time{}, nil)
	if got := gathered(t, s, "sofa_docs_written_total", ""); got != 5 {
		t.Errorf("total written %v, want 5", got)
	}
	if got := gathered(t, s, "sofa_db_checkpoint_seq", "a"); got != 9 {
		t.Errorf("checkpoint seq %v, want 9", got)
	}
	if got := gathered(t, s, "sofa_lag_seconds", ""); got != 1 {
		t.Errorf("lag samples %v, want 1", got)
	}
	d.BeginRun(true)
	d.EndRun(0, 0, 0, "", time.Now(), errors.New("target down"))
	st := s.Status().DBs["a"]
	if st.State != StateFailed || st.LastError != "target down" || st.LastCheckpoint != "9" || st.Runs != 3 {
		t.Errorf("status %+v", st)
	}
	if !d.SetBehind(true) || d.SetBehind(true) || gathered(t, s, "sofa_dbs_behind", "") != 1 {
		t.Error("behind edge")
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/status", nil))
	if !strings.Contains(rec.Body.String(), `"dbs_behind": 1`) {
		t.Errorf("/status: %s", rec.Body.String())
	}
}

func TestSeqNumber(t *testing.T) {
	for seq, want := range map[string]float64{"42-g1AAAA": 42, "7": 7, `"13"`: 13} {
		if n, ok := SeqNumber(seq); !ok || n != want {
			t.Errorf("SeqNumber(%q) = %v, %v", seq, n, ok)
		}
	}
	for _, seq := range []string{"", "now", "[1,\"x\"]"} {
		if _, ok := SeqNumber(seq); ok {
			t.Errorf("SeqNumber(%q) ok", seq)
		}
	}
}

// TestCatchUps: a run's initial copy of a database is no catch-up
// (sofa_catchups_total counts copies started because a database
// changed), and the one database of a continuous copy (OneDB) ends the
// run's initial catch-up when it first catches up; a database of many
// does not (SetCaughtUp does, once all did).
func TestCatchUps(t *testing.T) {
	s := New()
	d := s.DB("a")
	d.BeginRun(false)
	d.EndRun(1, 1, 0, "1", time.Time{}, nil)
	if got := gathered(t, s, "sofa_catchups_total", ""); got != 0 {
		t.Errorf("catch-ups after the initial copy: %v, want 0", got)
	}
	d.BeginRun(true)
	d.EndRun(1, 1, 0, "2", time.Now(), nil)
	if got := gathered(t, s, "sofa_catchups_total", ""); got != 1 {
		t.Errorf("catch-ups after a change: %v, want 1", got)
	}
	d.CaughtUp(true)
	if s.Status().InitialCatchUpDone {
		t.Error("a database of many caught up: the run's initial catch-up said done")
	}
	one := New()
	o := one.OneDB("b")
	if st := one.Status(); st.InitialCatchUpDone || st.DBs["b"].State != StateRunning || st.Mode != ModeChanges {
		t.Errorf("before catching up: %+v (want the mode %q)", st, ModeChanges)
	}
	o.CaughtUp(false)
	if one.Status().InitialCatchUpDone {
		t.Error("not caught up, but the initial catch-up said done")
	}
	o.CaughtUp(true)
	if !one.Status().InitialCatchUpDone {
		t.Error("the one database caught up: /status does not say the initial catch-up is done")
	}
}
