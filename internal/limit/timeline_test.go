package limit

import (
	"math"
	"testing"
	"time"
)

func TestTimeline_MeansAndMerging(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var tl timeline
	tl.init(t0, 4)
	// 4 for 1 s, 10 for 2 s, 6 for 1 s: 4 s in 100 ms buckets.
	tl.set(t0.Add(time.Second), 10)
	tl.set(t0.Add(3*time.Second), 6)
	spans := tl.spans(t0.Add(4 * time.Second))
	if len(spans) != 40 {
		t.Fatalf("%d spans, want 40", len(spans))
	}
	if s := spans[5]; s.Mean != 4 || s.Min != 4 || s.Max != 4 {
		t.Errorf("span 5 = %+v, want mean 4", s)
	}
	if s := spans[20]; s.Mean != 10 {
		t.Errorf("span 20 = %+v, want mean 10", s)
	}
	// spans does not change the timeline.
	if again := tl.spans(t0.Add(4 * time.Second)); len(again) != 40 {
		t.Errorf("second call: %d spans", len(again))
	}

	// A change inside a bucket gives its time-weighted mean.
	tl.set(t0.Add(4*time.Second+25*time.Millisecond), 2)
	s := tl.spans(t0.Add(4*time.Second + 100*time.Millisecond))[40]
	if math.Abs(s.Mean-3) > 1e-9 || s.Min != 2 || s.Max != 6 {
		t.Errorf("mixed span = %+v, want mean 3 (6 for 25 ms, 2 for 75 ms), min 2, max 6", s)
	}

	// A long life keeps at most timelineCap buckets and the whole mean.
	tl.set(t0.Add(60*time.Second), 8)
	all := tl.spans(t0.Add(100 * time.Second))
	if len(all) > timelineCap {
		t.Errorf("%d spans, want at most %d", len(all), timelineCap)
	}
	var sec, w float64
	for _, s := range all {
		sec += s.Seconds
		w += s.Mean * s.Seconds
	}
	want := 4*1 + 10*2 + 6*1.025 + 2*(60-4.025) + 8*40
	if math.Abs(sec-100) > 1e-6 || math.Abs(w-want) > 1e-6 {
		t.Errorf("covered %.3f s with weight %.3f, want 100 s and %.3f", sec, w, want)
	}
	if !all[0].Start.Equal(t0) || all[len(all)-1].Max != 8 {
		t.Errorf("first %+v last %+v", all[0], all[len(all)-1])
	}
}

func TestLimiterStats_Timeline(t *testing.T) {
	l := New(Options{Initial: 3})
	time.Sleep(5 * time.Millisecond)
	st := l.Stats()
	if len(st.Timeline) != 1 || math.Abs(st.Timeline[0].Mean-3) > 1e-9 {
		t.Errorf("timeline = %+v, want one span at 3", st.Timeline)
	}
}
