package s3_test

import (
	"context"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/storage"
	"github.com/sofadb/sofa/storage/s3"
)

// TestStallsTimeOut: a part whose upload stalls, an answer that never
// comes and a read whose body stalls each fail after IdleTimeout and are
// retried: the upload completes and reads back equal. Without the idle
// timeout the stalled part and the stalled read wait forever (the guard
// below ends the test).
func TestStallsTimeOut(t *testing.T) {
	_, p, bucket := proxied(t)
	st := newStore(t, p.URL, s3.Options{PartSize: s3.MinPartSize, Transfers: 2, MaxBackoff: 50 * time.Millisecond, IdleTimeout: time.Second})
	rules := []faultproxy.Rule{
		// the first PUT is the marker part; a data part stalls
		{Name: "stall-part", Method: "PUT", After: 1, Times: 1, Fault: faultproxy.StallMidRequest, CutBytes: 64 << 10},
		// the first POST creates the upload; the second completes it
		{Name: "stall-answer", Method: "POST", After: 1, Times: 1, Delay: time.Hour},
		{Name: "stall-get", Method: "GET", Times: 1, Fault: faultproxy.StallMidBody, CutBytes: 1 << 20},
	}
	if err := p.SetRules(rules...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	roundTrip(t, ctx, st, "s3://"+bucket+"/stalls.sofa", pattern(3*s3.MinPartSize+777))
	for _, rule := range rules {
		if s := p.Rule(rule.Name); s.Fired != 1 {
			t.Errorf("rule %s fired %d times (%+v)", rule.Name, s.Fired, s)
		}
	}
	for _, name := range []string{"stall-answer", "stall-get"} {
		if s := p.Rule(name); s.Gone != 1 {
			t.Errorf("rule %s: the client gave up %d times, want 1", name, s.Gone)
		}
	}
}

// TestSlowUploadNotIdle: a part that takes several idle timeouts to send
// on a slow link, with no answer byte meanwhile, does not time out: a
// byte sent counts as a byte moved.
func TestSlowUploadNotIdle(t *testing.T) {
	_, p, bucket := proxied(t)
	st := newStore(t, p.URL, s3.Options{PartSize: s3.MinPartSize, Transfers: 1, MaxAttempts: 2, IdleTimeout: time.Second})
	p.SetLimits(faultproxy.Limits{ConnBytesPerSec: 2 << 20}) // 2.5 s per part
	ctx := context.Background()
	name := "s3://" + bucket + "/slow.sofa"
	data := pattern(s3.MinPartSize + 777)
	w, err := st.Create(ctx, name, storage.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeStream(t, w, data)
	if err := w.Commit(); err != nil {
		t.Fatalf("Commit of a slow upload: %v", err)
	}
	p.SetLimits(faultproxy.Limits{})
	if fi, err := st.Stat(ctx, name); err != nil || fi.Size != int64(len(data)) {
		t.Fatalf("Stat: %+v %v", fi, err)
	}
}
