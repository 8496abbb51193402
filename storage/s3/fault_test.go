package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/internal/s3test"
	"github.com/sofadb/sofa/storage"
	"github.com/sofadb/sofa/storage/s3"
)

const slowDown = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`

// proxied starts versitygw with the fault proxy in front (Host kept:
// SigV4 signs it).
func proxied(t *testing.T) (*s3test.Server, *faultproxy.Proxy, string) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t)
	p := faultproxy.StartT(t, srv.URL)
	p.KeepHost()
	return srv, p, bucket
}

// TestFaultsRetried: 500s, 503 SlowDown, resets after a part was sent
// and while it is sent, slow parts, and reads cut mid-body: the upload completes, checks out
// and reads back equal, and every fault fired.
func TestFaultsRetried(t *testing.T) {
	_, p, bucket := proxied(t)
	st := newStore(t, p.URL, s3.Options{PartSize: s3.MinPartSize, Transfers: 3, MaxBackoff: 50 * time.Millisecond})
	rules := []faultproxy.Rule{
		{Name: "500", Method: "PUT", After: 1, Times: 2, Fault: faultproxy.Status, Status: 500},
		{Name: "slowdown", Method: "PUT", After: 2, Times: 2, Fault: faultproxy.Status, Status: 503, Body: slowDown, RetryAfter: "0"},
		{Name: "reset", Method: "PUT", After: 3, Times: 2, Fault: faultproxy.ResetAfterForward},
		{Name: "reset-mid-part", Method: "PUT", After: 2, Times: 2, Fault: faultproxy.ResetMidRequest, CutBytes: 1 << 20},
		{Name: "slow", Method: "PUT", After: 4, Times: 2, Delay: 300 * time.Millisecond},
		{Name: "complete-500", Method: "POST", After: 1, Times: 1, Fault: faultproxy.Status, Status: 500},
		{Name: "cut-get", Method: "GET", Times: 2, Fault: faultproxy.ResetMidBody, CutBytes: 1 << 20},
	}
	if err := p.SetRules(rules...); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, context.Background(), st, "s3://"+bucket+"/faulty.sofa", pattern(6*s3.MinPartSize+777))
	for _, rule := range rules {
		if s := p.Rule(rule.Name); s.Fired == 0 {
			t.Errorf("rule %s never fired (%+v)", rule.Name, s)
		}
	}
}

// roundTrip uploads data to name, reads it back and fails t unless it
// is equal.
func roundTrip(t *testing.T, ctx context.Context, st *s3.Store, name string, data []byte) {
	t.Helper()
	w, err := st.Create(ctx, name, storage.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeStream(t, w, data)
	if err := w.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	r, err := st.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (%v), equal %v", len(got), err, bytes.Equal(got, data))
	}
}

// TestPersistentFailureAborts: parts that always fail end the upload
// with an error, and the multipart upload is aborted: no object under
// the key, no upload in progress.
func TestPersistentFailureAborts(t *testing.T) {
	srv, p, bucket := proxied(t)
	st := newStore(t, p.URL, s3.Options{PartSize: s3.MinPartSize, MaxAttempts: 3, MaxBackoff: 20 * time.Millisecond, RetryTime: 2 * time.Second})
	// the first CreateMultipartUpload's answer lost too: its upload is
	// aborted with the writer's
	if err := p.SetRules(faultproxy.Rule{Name: "down", Method: "PUT", Fault: faultproxy.Status, Status: http.StatusServiceUnavailable, Body: slowDown},
		faultproxy.Rule{Name: "create-lost", Method: "POST", Query: `(^|&)uploads(=|&|$)`, Times: 1, Fault: faultproxy.ResetAfterForward}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	name := "s3://" + bucket + "/never.sofa"
	w, err := st.Create(ctx, name, storage.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(4 * s3.MinPartSize)
	var werr error
	for len(data) > 0 && werr == nil {
		k := min(len(data), 1<<20)
		_, werr = w.Write(data[:k])
		data = data[k:]
	}
	if werr == nil {
		werr = w.Commit()
	} else {
		w.Abort()
	}
	if werr == nil {
		t.Fatal("the upload succeeded through a server that refuses every part")
	}
	t.Logf("error: %v", werr)
	if got := p.Rule("down").Fired; got < 3 {
		t.Fatalf("%d refused parts: no retry", got)
	}
	if u := s3test.Uploads(t, srv.URL, bucket); len(u) != 0 {
		t.Fatalf("uploads left: %v", u)
	}
	if _, err := st.Stat(ctx, name); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("Stat: %v, want ErrNotExist", err)
	}
}

// TestAbortLetsPartsFinish: an Abort while parts are in flight lets them
// finish before it aborts the upload (a part the client cancels may
// still be stored by the server after the abort and bring the upload
// back): no part request is given up, and no upload is left.
func TestAbortLetsPartsFinish(t *testing.T) {
	srv, p, bucket := proxied(t)
	st := newStore(t, p.URL, s3.Options{PartSize: s3.MinPartSize, Transfers: 3})
	if err := p.SetRules(faultproxy.Rule{Name: "slow-part", Method: "PUT", Delay: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	name := "s3://" + bucket + "/abort-in-flight.sofa"
	w, err := st.Create(ctx, name, storage.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeStream(t, w, pattern(3*s3.MinPartSize))
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if s := p.Rule("slow-part"); s.Fired < 3 || s.Gone != 0 {
		t.Fatalf("parts delayed %d, given up by the client %d: want >= 3 delayed, none given up", s.Fired, s.Gone)
	}
	if u := s3test.Uploads(t, srv.URL, bucket); len(u) != 0 {
		t.Fatalf("uploads left after Abort: %v", u)
	}
	if _, err := st.Stat(ctx, name); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("Stat after Abort: %v", err)
	}
}

// TestRetriedCreateLeavesNoUpload: a CreateMultipartUpload the server
// executed but whose answer was lost (here reset after forwarding; a
// server that stalls and then runs every request the SDK sent again does
// the same) is sent again by the SDK: the server then holds uploads of
// the key that the writer never knew. Once the archive is complete, none
// is left in progress.
func TestRetriedCreateLeavesNoUpload(t *testing.T) {
	srv, p, bucket := proxied(t)
	st := newStore(t, p.URL, s3.Options{PartSize: s3.MinPartSize, Transfers: 2, MaxBackoff: 50 * time.Millisecond})
	rule := faultproxy.Rule{Name: "create-lost", Method: "POST", Query: `(^|&)uploads(=|&|$)`, Times: 2, Fault: faultproxy.ResetAfterForward}
	if err := p.SetRules(rule); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, context.Background(), st, "s3://"+bucket+"/retried.sofa", pattern(3*s3.MinPartSize+5))
	if s := p.Rule(rule.Name); s.Fired != 2 {
		t.Fatalf("rule fired %d times, want 2 (%+v)", s.Fired, s)
	}
	if ids := uploadIDs(t, srv.URL, bucket, "retried.sofa"); len(ids) != 0 {
		t.Errorf("uploads of the key still in progress after the archive was completed: %v", ids)
	}
}

// TestRetryTimeOutlastsAttempts: an outage of more attempts than
// DefaultMaxAttempts (every request of the upload and of the read back
// reset, 25 times in a row, as while an S3 service restarts) is carried
// through when RetryTime leaves room for them: MaxAttempts grows with
// RetryTime (a new user saw a 15 s outage fail the backup whatever
// --retry-time said).
func TestRetryTimeOutlastsAttempts(t *testing.T) {
	_, p, bucket := proxied(t)
	const outage = 2*s3.DefaultMaxAttempts + 5
	var mu sync.Mutex
	var logged []string
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, fmt.Sprintf(format, args...))
	}
	st := newStore(t, p.URL, s3.Options{PartSize: s3.MinPartSize, Transfers: 1, MaxBackoff: 20 * time.Millisecond, RetryTime: 2 * time.Second, Log: logf})
	rule := faultproxy.Rule{Name: "down", After: 2, Times: outage, Fault: faultproxy.Reset}
	if err := p.SetRules(rule); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, context.Background(), st, "s3://"+bucket+"/outage.sofa", pattern(2*s3.MinPartSize+5))
	if s := p.Rule("down"); s.Fired != outage {
		t.Errorf("the outage reset %d requests, want %d", s.Fired, outage)
	}
	// Options.Log: one line per retry, naming the operation, without the
	// secret key
	mu.Lock()
	defer mu.Unlock()
	if len(logged) < outage/2 || len(logged) > outage {
		t.Errorf("%d retries logged, want about one per reset (%d): %q", len(logged), outage, logged)
	}
	secret := s3test.SecretKey
	for _, l := range logged {
		if !strings.HasPrefix(l, "s3: retry ") || !strings.Contains(l, bucket) || strings.Contains(l, secret) {
			t.Errorf("retry line %q: want the bucket named, no secret", l)
		}
	}
}
