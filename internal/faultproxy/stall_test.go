package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// StallMidBody: the client gets the headers and CutBytes of the body,
// then nothing; when it gives up the rule counts it as gone.
func TestProxy_StallMidBody(t *testing.T) {
	p, s, db := setup(t)
	for i := range 20 {
		if _, err := s.Client().PutDoc(t.Context(), db, fmt.Sprint("d", i), map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.SetRules(Rule{Name: "stall", Path: `/_all_docs$`, Fault: StallMidBody, CutBytes: 100}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/"+db+"/_all_docs", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := make([]byte, 100)
	if _, err := io.ReadFull(resp.Body, got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, first 100 bytes: %v", resp.StatusCode, err)
	}
	// nothing more comes: the read ends when the client gives up
	timer := time.AfterFunc(300*time.Millisecond, cancel)
	defer timer.Stop()
	if _, err := resp.Body.Read(make([]byte, 1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after the stall: %v, want the client's cancel", err)
	}
	deadline := time.Now().Add(time.Minute)
	for p.Rule("stall").Gone != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled request was not counted gone: %+v", p.Rule("stall"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// StallMidRequest: the proxy reads CutBytes of the body and no more;
// the client's request ends only when the client gives up, and nothing
// reaches the server.
func TestProxy_StallMidRequest(t *testing.T) {
	p, s, db := setup(t)
	if err := p.SetRules(Rule{Name: "stall", Method: http.MethodPost, Times: 1, Fault: StallMidRequest, CutBytes: 1000}); err != nil {
		t.Fatal(err)
	}
	big := `{"_id":"big","pad":"` + strings.Repeat("x", 4<<20) + `"}`
	// a client that waits 500 ms: it must time out (an answer or a
	// reset would end it otherwise)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/"+db, strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the stalled request was answered %d", resp.StatusCode)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stalled request: %v, want the client's timeout", err)
	}
	if st := p.Rule("stall"); st.Fired != 1 {
		t.Fatalf("rule fired %d times", st.Fired)
	}
	if docExists(t, s, db, "big") {
		t.Error("the stalled request reached the server")
	}
	if a := do(t, http.MethodPost, p.URL+"/"+db, big); a.status != http.StatusCreated {
		t.Errorf("next request: %d %s %v", a.status, a.body, a.err)
	}
}
