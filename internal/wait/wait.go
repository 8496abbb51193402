// Package wait holds the one way the module sleeps: for a duration or
// until its context ends.
package wait

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends: then it returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
