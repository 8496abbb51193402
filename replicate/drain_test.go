package replicate

import (
	"context"
	"errors"
	"testing"
	"time"
)

type drainKey struct{}

func TestDrain_OutlivesCancelByGrace(t *testing.T) {
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), drainKey{}, 7))
	dctx, done := drain(ctx, 50*time.Millisecond)
	defer done()
	if dctx.Value(drainKey{}) != 7 {
		t.Fatal("drain context lost its parent's values")
	}
	cancel()
	if err := dctx.Err(); err != nil {
		t.Fatalf("drain context ended with its parent: %v", err)
	}
	select {
	case <-dctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("drain context not cancelled after its grace")
	}
	if !errors.Is(context.Cause(dctx), context.Canceled) {
		t.Fatalf("cause %v, want the parent's", context.Cause(dctx))
	}
}

func TestDrain_DoneReleases(t *testing.T) {
	dctx, done := drain(context.Background(), time.Hour)
	done()
	if dctx.Err() == nil {
		t.Fatal("done left the drain context running")
	}
}
