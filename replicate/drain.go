package replicate

import (
	"context"
	"time"
)

// interruptGrace is how long a write already sent may still take once the
// run is interrupted (SIGINT, or another worker's error): the target's
// acknowledgement is counted in docs_written and the final checkpoint
// covers it, instead of a write that landed but is counted by no run.
const interruptGrace = 10 * time.Second

// drain returns a context for a write that has started: it is cancelled
// grace after ctx is, not with it. Its values are ctx's. done releases it.
func drain(ctx context.Context, grace time.Duration) (context.Context, func()) {
	dctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(grace, func() { cancel(context.Cause(ctx)) })
		context.AfterFunc(dctx, func() { t.Stop() })
	})
	return dctx, func() {
		stop()
		cancel(nil)
	}
}
