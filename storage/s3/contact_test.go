package s3_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/storage/s3"
)

// An S3 service that never answered is given up on after
// FirstContactTime, whatever RetryTime says (found by a tester: with the
// service down at the start, a backup said nothing for 4 minutes, each
// startup request waiting out its own retry time).
func TestFirstContactFailsFast(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	st := newStore(t, "http://"+addr, s3.Options{RetryTime: 10 * time.Minute, MaxBackoff: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // RetryTime alone: 10
	defer cancel()
	start := time.Now()
	_, err = st.Open(ctx, "s3://bucket/x.sofa")
	if err == nil {
		t.Fatal("an S3 service that is not there answered")
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("gave up after %s, want about %s (RetryTime 10m)", took, s3.FirstContactTime)
	}
}

// Once the service answered, an outage longer than FirstContactTime is
// waited out (RetryTime).
func TestOutageAfterContactWaitedOut(t *testing.T) {
	_, p, bucket := proxied(t)
	st := newStore(t, p.URL, s3.Options{PartSize: s3.MinPartSize, Transfers: 1, MaxBackoff: 2 * time.Second, RetryTime: 2 * time.Minute})
	name := "s3://" + bucket + "/after-contact.sofa"
	roundTrip(t, context.Background(), st, name, pattern(100)) // answered
	if err := p.SetRules(faultproxy.Rule{Name: "down", Times: 20, Fault: faultproxy.Reset}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	roundTrip(t, context.Background(), st, name+"2", pattern(100))
	if s := p.Rule("down"); s.Fired != 20 {
		t.Errorf("the outage reset %d requests, want 20", s.Fired)
	}
	if took := time.Since(start); took <= s3.FirstContactTime {
		t.Errorf("the outage took %s, not more than %s: the test proves nothing (its backoff was too short)", took, s3.FirstContactTime)
	}
}

// An outage is waited out once: once RetryTime has passed since the
// requests began to go unanswered, a request is no longer retried (a
// restore of 25 databases from a service that went away failed them one
// after another, each after its own RetryTime: 19 times RetryTime).
func TestOutageWaitedOutOnce(t *testing.T) {
	_, p, bucket := proxied(t)
	st := newStore(t, p.URL, s3.Options{PartSize: s3.MinPartSize, Transfers: 1, MaxBackoff: 200 * time.Millisecond, RetryTime: 2 * time.Second})
	name := "s3://" + bucket + "/once.sofa"
	roundTrip(t, context.Background(), st, name, pattern(100)) // answered
	if err := p.SetRules(faultproxy.Rule{Name: "down", Fault: faultproxy.Reset}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := st.Open(context.Background(), name); err == nil {
		t.Fatal("opened through an outage")
	}
	first := time.Since(start)
	start = time.Now()
	if _, err := st.Open(context.Background(), name); err == nil {
		t.Fatal("opened through an outage")
	}
	if second := time.Since(start); second > first/2 {
		t.Errorf("the second request in the outage took %s, the first %s: want it given up at once", second, first)
	}
}

// Unanswered tells an outage in progress (the progress line's waiting
// says so), and nothing once the service answers again.
func TestUnanswered(t *testing.T) {
	_, p, bucket := proxied(t)
	st := newStore(t, p.URL, s3.Options{MaxBackoff: 50 * time.Millisecond, RetryTime: time.Second})
	name := "s3://" + bucket + "/unanswered.sofa"
	roundTrip(t, context.Background(), st, name, pattern(100))
	if d, ok := st.Unanswered(); ok {
		t.Errorf("unanswered for %s while the service answers", d)
	}
	if err := p.SetRules(faultproxy.Rule{Name: "down", Fault: faultproxy.Reset}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Open(context.Background(), name); err == nil {
		t.Fatal("opened through an outage")
	}
	if _, ok := st.Unanswered(); !ok {
		t.Error("not unanswered in an outage")
	}
	if err := p.SetRules(); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, context.Background(), st, name+"2", pattern(100))
	if d, ok := st.Unanswered(); ok {
		t.Errorf("unanswered for %s once the service answers again", d)
	}
}
