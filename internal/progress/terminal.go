package progress

import (
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// totalScale is the resolution of the total bar (fraction × totalScale).
const totalScale = 10000

// StartTerminal draws t on w, which should be a terminal: a total bar
// (databases done and total, documents, bytes, rate, ETA) and one bar for
// each of the busiest active databases, removed when they finish or fall
// out of the busiest. It redraws every Options.Interval (200 ms by
// default).
func StartTerminal(t *Tracker, w io.Writer, o Options) *Display {
	every := o.Interval
	if every <= 0 {
		every = 200 * time.Millisecond
	}
	d := newDisplay()
	p := mpb.New(mpb.WithOutput(w), mpb.WithRefreshRate(every), mpb.WithAutoRefresh())
	var totalText, etaText atomic.Value
	totalText.Store("")
	etaText.Store("")
	total := p.New(totalScale, mpb.BarStyle(),
		mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return totalText.Load().(string) })),
		mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return etaText.Load().(string) })),
		mpb.BarPriority(-1))
	tm := &termState{p: p, bars: map[string]*dbBar{}, o: o}
	go func() {
		defer close(d.done)
		var r rates
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			final := false
			select {
			case <-tick.C:
			case <-d.stop:
				final = true
			}
			s := t.Snapshot()
			r.update(s)
			totalText.Store(totalLine(s, &r, o))
			if eta, ok := s.ETA(); ok && !final {
				etaText.Store("ETA " + eta.Round(time.Second).String())
			} else {
				etaText.Store(s.Elapsed.Round(time.Second).String())
			}
			if final {
				tm.sync(nil)
				if s.DBsTotal > 0 && s.DBsDone == s.DBsTotal {
					total.SetCurrent(totalScale)
				} else {
					total.SetCurrent(int64(s.Fraction() * totalScale))
					total.Abort(false)
				}
				p.Wait()
				return
			}
			total.SetCurrent(int64(s.Fraction() * totalScale))
			tm.sync(r.busiest(s, o.busiest()))
		}
	}()
	return d
}

func totalLine(s Snapshot, r *rates, o Options) string {
	var b strings.Builder
	if s.TotalUnknown {
		fmt.Fprintf(&b, "dbs %d/?", s.DBsDone)
	} else {
		fmt.Fprintf(&b, "dbs %d/%d", s.DBsDone, s.DBsTotal)
	}
	if s.DBsFailed > 0 {
		fmt.Fprintf(&b, " (%d failed)", s.DBsFailed)
	}
	if s.DBsInterrupted > 0 {
		fmt.Fprintf(&b, " (%d interrupted)", s.DBsInterrupted)
	}
	fmt.Fprintf(&b, " | %s docs %s | %s docs/s %s/s",
		humanCount(float64(s.Totals.DocsWritten)), humanBytes(float64(s.Totals.Bytes)),
		humanCount(r.docsPS), humanBytes(r.bytesPS))
	if s.Totals.DocWriteFailures > 0 {
		fmt.Fprintf(&b, " | %d write failures", s.Totals.DocWriteFailures)
	}
	if o.Extra != nil {
		attrsText(&b, o.Extra())
	}
	return b.String()
}

type dbBar struct {
	bar  *mpb.Bar
	text atomic.Value // string
}

type termState struct {
	p    *mpb.Progress
	bars map[string]*dbBar
	o    Options
}

// sync makes the database bars show exactly want.
func (ts *termState) sync(want []Active) {
	keep := make(map[string]bool, len(want))
	for _, a := range want {
		keep[a.Name] = true
		b := ts.bars[a.Name]
		if b == nil {
			b = &dbBar{}
			b.text.Store("")
			name := a.Name
			if len(name) > 28 {
				name = name[:13] + "…" + name[len(name)-14:]
			}
			b.bar = ts.p.New(barTotal(a.Counts), mpb.BarStyle(),
				mpb.PrependDecorators(decor.Name(name, decor.WC{W: 29, C: decor.DindentRight})),
				mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return b.text.Load().(string) })))
			ts.bars[a.Name] = b
		}
		b.bar.SetTotal(barTotal(a.Counts), false)
		b.bar.SetCurrent(a.DocsWritten + a.DocWriteFailures)
		tot := "?"
		if a.DocsTotal > 0 {
			tot = humanCount(float64(a.DocsTotal))
		}
		b.text.Store(fmt.Sprintf("%s/%s docs %s", humanCount(float64(a.DocsWritten)), tot, humanBytes(float64(a.Bytes))))
	}
	for name, b := range ts.bars {
		if !keep[name] {
			b.bar.Abort(true)
			delete(ts.bars, name)
		}
	}
}

// barTotal is the bar's total: the expected documents, or one more than
// done when unknown (so the bar never completes by itself).
func barTotal(c Counts) int64 {
	return max(c.DocsTotal, c.DocsWritten+c.DocWriteFailures+1)
}
