package progress

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestTracker_TotalsAndFraction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTracker()
		tr.SetTotal(4)
		a, b := tr.Begin("a"), tr.Begin("b")
		a.SetDocsTotal(100)
		a.AddDocsRead(60)
		a.AddDocsWritten(50)
		a.AddBytes(1000)
		b.AddDocsWritten(7)
		b.AddDocWriteFailures(1)
		time.Sleep(10 * time.Second)
		tr.End(b, true)
		tr.End(b, true) // twice: ignored
		s := tr.Snapshot()
		if s.DBsDone != 1 || s.DBsFailed != 1 || len(s.Active) != 1 || s.Active[0].Name != "a" {
			t.Fatalf("snapshot = %+v", s)
		}
		want := Counts{DocsRead: 60, DocsWritten: 57, DocWriteFailures: 1, Bytes: 1000, DocsTotal: 100}
		if s.Totals != want {
			t.Errorf("Totals = %+v, want %+v", s.Totals, want)
		}
		// b done (1) + a half done (0.5) of 4.
		if f := s.Fraction(); f != 1.5/4 {
			t.Errorf("Fraction() = %v, want %v", f, 1.5/4)
		}
		eta, ok := s.ETA()
		if want := 10 * time.Second * 25 / 15; !ok || eta < want-time.Millisecond || eta > want+time.Millisecond {
			t.Errorf("ETA() = %s, %v; want %s, true", eta, ok, want)
		}
	})
}

// Databases weigh by their documents (found by a tester: three small
// databases done and a large one a third through read as 84% done, and
// the ETA said 0s with most of the work ahead); one whose total is not
// known weighs the mean of the known ones.
func TestTracker_FractionWeighsDocuments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTracker()
		tr.SetTotal(5)
		for _, n := range []string{"s1", "s2", "s3"} {
			d := tr.Begin(n)
			d.SetDocsTotal(10)
			d.AddDocsWritten(10)
			tr.End(d, false)
		}
		big := tr.Begin("big")
		big.SetDocsTotal(1000)
		big.AddDocsWritten(300)
		time.Sleep(10 * time.Second)
		s := tr.Snapshot()
		// done: 30 + 300; whole: 1030 known + one not begun at the mean
		// (1030 / 4)
		want := 330 / (1030 + 1030.0/4)
		if f := s.Fraction(); f < want-1e-9 || f > want+1e-9 {
			t.Errorf("Fraction() = %v, want %v", f, want)
		}
		if eta, ok := s.ETA(); !ok || eta < 20*time.Second {
			t.Errorf("ETA() = %s, %v; want about %s", eta, ok, time.Duration(float64(10*time.Second)*(1-want)/want))
		}
	})
}

func TestNilTrackerAndDB(t *testing.T) {
	var tr *Tracker
	tr.SetTotal(3)
	d := tr.Begin("x")
	d.AddDocsRead(1)
	d.AddDocsWritten(1)
	d.AddDocWriteFailures(1)
	d.AddBytes(1)
	d.SetDocsTotal(1)
	tr.End(d, false)
	if d.Counts() != (Counts{}) || d.Name() != "" {
		t.Errorf("nil DB counted: %+v", d.Counts())
	}
	if s := tr.Snapshot(); s.DBsTotal != 0 || s.Fraction() != 0 {
		t.Errorf("nil tracker snapshot = %+v", s)
	}
	if _, ok := (Snapshot{}).ETA(); ok {
		t.Error("ETA of an empty snapshot: ok = true")
	}
	var disp *Display
	disp.Stop()
}

// syncBuffer is a bytes.Buffer safe for the display goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestStartLog_PeriodicLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		lg := slog.New(slog.NewTextHandler(&buf, nil))
		tr := NewTracker()
		tr.SetTotal(2)
		d := tr.Begin("busy/db")
		tr.Begin("idle")
		disp := StartLog(tr, lg, Options{Interval: 10 * time.Second, Busiest: 1,
			Extra: func() []slog.Attr { return []slog.Attr{slog.Int("limit", 12)} }})
		for range 3 { // between ticks, never at the same instant
			time.Sleep(5 * time.Second)
			d.AddDocsWritten(100)
			d.AddBytes(5000)
			time.Sleep(5 * time.Second)
		}
		synctest.Wait()
		disp.Stop()
		out := buf.String()
		if n := strings.Count(out, "msg=progress "); n != 3 {
			t.Errorf("%d periodic total lines, want 3:\n%s", n, out)
		}
		if n := strings.Count(out, `msg="progress db" db=busy/db`); n != 3 {
			t.Errorf("%d lines for the busiest db, want 3:\n%s", n, out)
		}
		if strings.Contains(out, "db=idle") {
			t.Errorf("idle db logged with Busiest=1:\n%s", out)
		}
		for _, want := range []string{"docs_per_s=10", "bytes_per_s=500", "limit=12", `msg="progress final"`, "docs_written=300"} {
			if !strings.Contains(out, want) {
				t.Errorf("log lacks %q:\n%s", want, out)
			}
		}
	})
}

func TestStartTerminal_DrawsBars(t *testing.T) {
	var buf syncBuffer
	tr := NewTracker()
	tr.SetTotal(3)
	a := tr.Begin("alpha")
	a.SetDocsTotal(200)
	a.AddDocsWritten(100)
	b := tr.Begin("beta")
	b.AddDocsWritten(5)
	disp := StartTerminal(tr, &buf, Options{Interval: 5 * time.Millisecond})
	defer disp.Stop()
	// Frames are drawn by the display's own goroutines: wait for the
	// frame showing each state, however long the machine takes.
	drawn := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			out := buf.String()
			missing := ""
			for _, w := range want {
				if !strings.Contains(out, w) {
					missing = w
					break
				}
			}
			if missing == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("terminal output lacks %q after a minute:\n%s", missing, out)
			}
			time.Sleep(time.Millisecond)
		}
	}
	drawn("alpha", "beta", "dbs 0/3", "100/200 docs")
	tr.End(b, false)
	drawn("dbs 1/3")
}

// TestStartLog_NoLineForUnprintedChange: a database's document count
// becoming known (which the totals line does not print) makes no new
// line: it repeated the line before, word for word.
func TestStartLog_NoLineForUnprintedChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		lg := slog.New(slog.NewTextHandler(&buf, nil))
		tr := NewTracker()
		tr.SetTotal(1)
		d := tr.Begin("db")
		disp := StartLog(tr, lg, Options{Interval: 10 * time.Second, Quiet: time.Hour})
		time.Sleep(15 * time.Second) // the first tick's line
		d.SetDocsTotal(300)
		time.Sleep(10 * time.Second) // the next tick
		synctest.Wait()
		disp.Stop()
		if n := strings.Count(buf.String(), "msg=progress "); n != 1 {
			t.Errorf("%d totals lines, want 1 (nothing printed changed):\n%s", n, buf.String())
		}
	})
}

// TestStartLog_UnknownTotal: while the number of databases is not known
// (an archive read in order from stdin), the lines say dbs_total=unknown
// and give no eta (they said dbs_total=529 of 3,000 and eta=0s for the
// whole of a 95 s restore); the final line gives the total reached, and
// the terminal's total line a "?".
func TestStartLog_UnknownTotal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		lg := slog.New(slog.NewTextHandler(&buf, nil))
		tr := NewTracker()
		tr.SetTotal(-1)
		d := tr.Begin("a")
		disp := StartLog(tr, lg, Options{Interval: 10 * time.Second})
		time.Sleep(5 * time.Second)
		d.AddDocsWritten(10)
		tr.End(d, false)
		tr.Begin("b").AddDocsWritten(1)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if s := tr.Snapshot(); !strings.HasPrefix(totalLine(s, &rates{}, Options{}), "dbs 1/? ") {
			t.Errorf("terminal total line %q, want dbs 1/?", totalLine(s, &rates{}, Options{}))
		}
		disp.Stop()
		out := buf.String()
		periodic, final, _ := strings.Cut(out, `msg="progress final"`)
		if !strings.Contains(periodic, "dbs_total=unknown") || strings.Contains(periodic, "eta=") {
			t.Errorf("periodic lines, want dbs_total=unknown and no eta:\n%s", periodic)
		}
		if !strings.Contains(final, "dbs_total=2") {
			t.Errorf("final line, want dbs_total=2:\n%s", final)
		}
	})
}

// TestStartLog_WaitingLineNoStaleRate: a "progress waiting" line after a
// stall says docs_per_s=0 and gives no eta (it showed the smoothed rate
// of before the stall, and an eta as if the run went on); the next line
// after a change gives a rate and an eta again.
func TestStartLog_WaitingLineNoStaleRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		lg := slog.New(slog.NewTextHandler(&buf, nil))
		tr := NewTracker()
		tr.SetTotal(2)
		d := tr.Begin("a")
		disp := StartLog(tr, lg, Options{Interval: 10 * time.Second, Quiet: 30 * time.Second})
		time.Sleep(5 * time.Second)
		d.AddDocsWritten(1000)
		tr.End(d, false)
		e := tr.Begin("b")
		time.Sleep(10 * time.Second) // a line with a rate and an eta
		time.Sleep(40 * time.Second) // then a waiting line
		e.AddDocsWritten(10)
		time.Sleep(10 * time.Second) // a line with a rate again
		synctest.Wait()
		disp.Stop()
		var waiting, after string
		for _, l := range strings.Split(buf.String(), "\n") {
			switch {
			case strings.Contains(l, `msg="progress waiting"`):
				waiting = l
			case waiting != "" && strings.Contains(l, "msg=progress "):
				after = l
			}
		}
		if waiting == "" || after == "" {
			t.Fatalf("want a waiting line and a line after it:\n%s", buf.String())
		}
		if !strings.Contains(waiting, "docs_per_s=0 ") || !strings.Contains(waiting, "bytes_per_s=0") || strings.Contains(waiting, "eta=") {
			t.Errorf("waiting line, want docs_per_s=0, bytes_per_s=0 and no eta: %s", waiting)
		}
		if strings.Contains(after, "docs_per_s=0 ") || !strings.Contains(after, "eta=") {
			t.Errorf("line after the stall, want a rate and an eta: %s", after)
		}
	})
}

// TestTracker_EndLeftOut: a database left out after it began (deleted
// at the source) leaves the count of databases, done in none, as the
// run's summary leaves it; its revisions stay in the totals, its
// doc_write_failures do not. A total known only as databases begin
// loses it too.
func TestTracker_EndLeftOut(t *testing.T) {
	for _, total := range []int{3, -1} {
		tr := NewTracker()
		tr.SetTotal(total)
		keep, gone := tr.Begin("keep"), tr.Begin("gone")
		tr.Begin("third")
		gone.AddDocsRead(5)
		gone.AddDocsWritten(4)
		gone.AddDocWriteFailures(1)
		tr.EndLeftOut(gone)
		tr.EndLeftOut(gone) // twice: nothing more
		tr.End(keep, false)
		s := tr.Snapshot()
		if s.DBsTotal != 2 || s.DBsDone != 1 || s.DBsFailed != 0 || len(s.Active) != 1 {
			t.Errorf("total %d: %d of %d done (%d failed), %d active; want 1 of 2, 0 failed, 1 active", total, s.DBsDone, s.DBsTotal, s.DBsFailed, len(s.Active))
		}
		if s.Totals.DocsRead != 5 || s.Totals.DocsWritten != 4 || s.Totals.DocWriteFailures != 0 {
			t.Errorf("total %d: totals %+v, want docs_read=5 docs_written=4 doc_write_failures=0", total, s.Totals)
		}
	}
}
