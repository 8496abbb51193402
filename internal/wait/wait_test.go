package wait

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := Sleep(t.Context(), time.Minute); err != nil || time.Since(start) != time.Minute {
			t.Errorf("Sleep(1m) = %v after %s", err, time.Since(start))
		}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		start = time.Now()
		if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) != time.Second {
			t.Errorf("Sleep(1h) cancelled after 1s = %v after %s", err, time.Since(start))
		}
	})
}
