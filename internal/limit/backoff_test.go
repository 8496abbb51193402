package limit

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"120", 120 * time.Second, true},
		{" 0 ", 0, true},
		{"-5", 0, false},
		{"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"99999999999999999999", 0, false},
		{"9223372036", 9223372036 * time.Second, true},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.v != "" {
			h.Set("Retry-After", tt.v)
		}
		got, ok := RetryAfter(h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("RetryAfter(%q) = %s, %v; want %s, %v", tt.v, got, ok, tt.want, tt.ok)
		}
	}
}

func TestBackoff_NextWithinCeiling(t *testing.T) {
	b := Backoff{Base: 10 * time.Millisecond, Max: time.Second}
	for attempt := -1; attempt < 100; attempt++ {
		ceil := b.ceiling(attempt)
		want := min(time.Second, 10*time.Millisecond<<max(min(attempt, 20), 0))
		if ceil != want {
			t.Fatalf("ceiling(%d) = %s, want %s", attempt, ceil, want)
		}
		var sum time.Duration
		const n = 200
		for range n {
			d := b.Next(attempt)
			if d < 0 || d > ceil {
				t.Fatalf("Next(%d) = %s, outside [0, %s]", attempt, d, ceil)
			}
			sum += d
		}
		// Full jitter: the mean is about half the ceiling.
		if mean := sum / n; mean < ceil/4 || mean > ceil*3/4 {
			t.Fatalf("mean of Next(%d) = %s, want about %s", attempt, mean, ceil/2)
		}
	}
}

func TestBackoff_Zero(t *testing.T) {
	var b Backoff
	if c := b.ceiling(0); c != DefaultBackoffBase {
		t.Errorf("zero Backoff first ceiling = %s, want %s", c, DefaultBackoffBase)
	}
	if c := b.ceiling(1000); c != DefaultBackoffMax {
		t.Errorf("zero Backoff late ceiling = %s, want %s", c, DefaultBackoffMax)
	}
}

func TestBackoff_DelayHonoursHintAndBudget(t *testing.T) {
	b := Backoff{Base: time.Millisecond, Max: 10 * time.Millisecond, Total: time.Minute}
	if d, ok := b.Delay(0, 0, 5*time.Second); !ok || d != 5*time.Second {
		t.Errorf("Delay with a 5s hint = %s, %v; want 5s, true", d, ok)
	}
	if d, ok := b.Delay(0, 58*time.Second, 5*time.Second); !ok || d != 2*time.Second {
		t.Errorf("Delay near the budget = %s, %v; want 2s, true", d, ok)
	}
	if _, ok := b.Delay(3, time.Minute, 0); ok {
		t.Error("Delay past the budget: ok = true, want false")
	}
	unbounded := Backoff{}
	if _, ok := unbounded.Delay(50, 1000*time.Hour, 0); !ok {
		t.Error("Delay without a budget: ok = false, want true")
	}
}

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := Sleep(t.Context(), 3*time.Second); err != nil || time.Since(start) != 3*time.Second {
			t.Errorf("Sleep(3s) = %v after %s", err, time.Since(start))
		}
		ctx, cancel := contextWithTimeout(t, time.Second)
		defer cancel()
		if err := Sleep(ctx, time.Hour); err == nil || time.Since(start) != 4*time.Second {
			t.Errorf("Sleep past ctx deadline = %v after %s", err, time.Since(start))
		}
	})
}

func contextWithTimeout(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), d)
}
