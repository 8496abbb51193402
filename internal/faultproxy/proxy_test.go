package faultproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
)

func TestMain(m *testing.M) { couchtest.Main(m) }

// setup returns a proxy in front of the shared server and a fresh database.
func setup(t *testing.T) (*Proxy, *couchtest.Server, string) {
	t.Helper()
	s := couchtest.Shared(t)
	p := StartT(t, s.URL)
	return p, s, s.NewDB(t)
}

type answer struct {
	status int
	header http.Header
	body   []byte
	err    error // transport or body read error
}

func do(t *testing.T, method, url string, body string) answer {
	t.Helper()
	return doWith(t, http.DefaultClient, method, url, body)
}

func doWith(t *testing.T, c *http.Client, method, url string, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b, err: err}
}

func docExists(t *testing.T, s *couchtest.Server, db, id string) bool {
	t.Helper()
	err := s.Client().GetJSON(t.Context(), "/"+couchtest.EscapeDB(db)+"/"+couchtest.EscapeID(id), nil)
	if couchtest.StatusOf(err) == http.StatusNotFound {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func TestProxy_ForwardsRawPaths(t *testing.T) {
	p, s, db := setup(t)
	a := do(t, http.MethodPut, p.URL+"/"+db+"/a%2Bb", `{"v":1}`)
	if a.err != nil || a.status != http.StatusCreated {
		t.Fatalf("PUT through proxy: %d %s %v", a.status, a.body, a.err)
	}
	if !docExists(t, s, db, "a+b") || docExists(t, s, db, "a b") {
		t.Error(`doc "a+b" not stored under its exact id`)
	}
	a = do(t, http.MethodGet, p.URL+"/", "")
	if !bytes.Contains(a.body, []byte("Welcome")) {
		t.Errorf("GET / through proxy: %s", a.body)
	}
	st := p.Stats()
	if st.Requests != 2 || st.Faults != 0 {
		t.Errorf("stats = %+v, want 2 requests, 0 faults", st)
	}
}

func TestProxy_StatusFaults(t *testing.T) {
	p, s, db := setup(t)
	for _, tc := range []struct {
		rule      Rule
		wantError string
	}{
		{Rule{Status: 429, RetryAfter: "2"}, "too_many_requests"},
		{Rule{Status: 500}, "unknown_error"},
		{Rule{Status: 503}, "service_unavailable"},
		{Rule{Status: 413}, "too_large"},
		{Rule{Status: 400, Body: `{"error":"bad_request","reason":"custom"}`}, "bad_request"},
	} {
		t.Run(fmt.Sprint(tc.rule.Status), func(t *testing.T) {
			tc.rule.Name, tc.rule.Method, tc.rule.Fault = "s", http.MethodPut, Status
			if err := p.SetRules(tc.rule); err != nil {
				t.Fatal(err)
			}
			id := fmt.Sprint("doc-", tc.rule.Status)
			a := do(t, http.MethodPut, p.URL+"/"+db+"/"+id, `{}`)
			if a.err != nil || a.status != tc.rule.Status {
				t.Fatalf("got %d %v, want %d", a.status, a.err, tc.rule.Status)
			}
			var e struct{ Error, Reason string }
			if err := json.Unmarshal(a.body, &e); err != nil || e.Error != tc.wantError || e.Reason == "" {
				t.Errorf("body %s, want error %q with a reason", a.body, tc.wantError)
			}
			if got := a.header.Get("Retry-After"); got != tc.rule.RetryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tc.rule.RetryAfter)
			}
			if docExists(t, s, db, id) {
				t.Error("request reached the server")
			}
		})
	}
	if got := p.Rule("s").Fired; got != 5 {
		t.Errorf("rule fired %d times, want 5", got)
	}
}

func TestProxy_AfterTimesAndProbability(t *testing.T) {
	p, _, db := setup(t)
	err := p.SetRules(Rule{Name: "first changes fails", Path: `/_changes$`, After: 1, Times: 2, Fault: Status, Status: 500})
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for range 5 {
		got = append(got, do(t, http.MethodGet, p.URL+"/"+db+"/_changes", "").status)
	}
	if want := []int{200, 500, 500, 200, 200}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("statuses = %v, want %v", got, want)
	}
	if rs := p.Rule("first changes fails"); rs.Matched != 5 || rs.Fired != 2 {
		t.Errorf("rule stats = %+v, want 5 matched, 2 fired", rs)
	}

	if err := p.SetRules(Rule{Name: "p", Method: http.MethodHead, Probability: 0.25, Fault: Status, Status: 503}); err != nil {
		t.Fatal(err)
	}
	fails := 0
	for range 200 {
		if do(t, http.MethodHead, p.URL+"/", "").status == 503 {
			fails++
		}
	}
	if fails < 25 || fails > 75 {
		t.Errorf("%d of 200 requests failed at probability 0.25", fails)
	}
	if int64(fails) != p.Rule("p").Fired {
		t.Errorf("Fired = %d, observed %d", p.Rule("p").Fired, fails)
	}
}

func TestProxy_BadRuleRejected(t *testing.T) {
	p := StartT(t, "http://127.0.0.1:1")
	for _, r := range []Rule{{Path: "("}, {Fault: Status}, {Fault: CutChanges}} {
		if err := p.SetRules(r); err == nil {
			t.Errorf("SetRules(%+v) accepted", r)
		}
	}
}

func TestProxy_Resets(t *testing.T) {
	p, s, db := setup(t)
	if err := p.SetRules(Rule{Name: "r", Method: http.MethodPut, Path: `/before$`, Fault: Reset},
		Rule{Name: "raf", Method: http.MethodPut, Path: `/after$`, Fault: ResetAfterForward}); err != nil {
		t.Fatal(err)
	}
	if a := do(t, http.MethodPut, p.URL+"/"+db+"/before", `{}`); a.err == nil {
		t.Errorf("reset before answer: got %d, want a connection error", a.status)
	}
	if docExists(t, s, db, "before") {
		t.Error("Reset forwarded the request")
	}
	if a := do(t, http.MethodPut, p.URL+"/"+db+"/after", `{}`); a.err == nil {
		t.Errorf("reset after forward: got %d, want a connection error", a.status)
	}
	if !docExists(t, s, db, "after") {
		t.Error("ResetAfterForward did not forward the request")
	}
	if st := p.Stats(); st.Faults != 2 {
		t.Errorf("Faults = %d, want 2", st.Faults)
	}
}

func TestProxy_ResetMidBody(t *testing.T) {
	p, s, db := setup(t)
	for i := range 20 {
		if _, err := s.Client().PutDoc(t.Context(), db, fmt.Sprint("d", i), map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.SetRules(Rule{Path: `/_all_docs$`, Fault: ResetMidBody, CutBytes: 100}); err != nil {
		t.Fatal(err)
	}
	a := do(t, http.MethodGet, p.URL+"/"+db+"/_all_docs", "")
	if a.err == nil || a.status != 200 {
		t.Fatalf("got status %d err %v, want 200 then a body error", a.status, a.err)
	}
	if len(a.body) != 100 {
		t.Errorf("read %d body bytes before the reset, want 100", len(a.body))
	}
}

func TestProxy_CutChanges(t *testing.T) {
	p, s, db := setup(t)
	var docs []json.RawMessage
	for i := range 20 {
		docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"d%02d"}`, i)))
	}
	if _, err := s.Client().BulkDocs(t.Context(), db, true, docs...); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, query string
		rule        Rule
		rows        int
	}{
		{"rows", "", Rule{Fault: CutChanges, CutRows: 5}, 5},
		{"bytes", "", Rule{Fault: CutChanges, CutBytes: 30}, -1},
		{"continuous rows", "?feed=continuous&since=0", Rule{Fault: CutChanges, CutRows: 3}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.rule.Path = `/_changes$`
			if err := p.SetRules(tc.rule); err != nil {
				t.Fatal(err)
			}
			a := do(t, http.MethodGet, p.URL+"/"+db+"/_changes"+tc.query, "")
			if a.status != 200 || a.err == nil {
				t.Fatalf("got %d err %v, want 200 then an unexpected end of body", a.status, a.err)
			}
			if bytes.Contains(a.body, []byte("last_seq")) {
				t.Errorf("cut answer carries last_seq: %s", a.body)
			}
			rows := bytes.Count(a.body, []byte(`"seq"`))
			if tc.rows >= 0 && rows != tc.rows {
				t.Errorf("got %d rows, want %d: %s", rows, tc.rows, a.body)
			}
			if tc.rule.CutBytes > 0 && len(a.body) > int(tc.rule.CutBytes)+1 {
				t.Errorf("got %d bytes, want at most %d", len(a.body), tc.rule.CutBytes+1)
			}
		})
	}
}

func TestProxy_Delay(t *testing.T) {
	p, _, _ := setup(t)
	if err := p.SetRules(Rule{Method: http.MethodGet, Delay: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if a := do(t, http.MethodGet, p.URL+"/", ""); a.err != nil || a.status != 200 {
		t.Fatalf("delayed request: %d %v", a.status, a.err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("answered after %v, want at least 300ms", d)
	}
	impatient := &http.Client{Timeout: 50 * time.Millisecond}
	if a := doWith(t, impatient, http.MethodGet, p.URL+"/", ""); a.err == nil {
		t.Error("client timeout did not fire during the delay")
	}
	if st := p.Stats(); st.Faults != 0 {
		t.Errorf("a pure delay counted as %d faults", st.Faults)
	}
}

// ResetMidRequest: the proxy reads part of the body and resets the
// connection; nothing reaches the server; the next request passes.
func TestProxy_ResetMidRequest(t *testing.T) {
	p, s, db := setup(t)
	if err := p.SetRules(Rule{Name: "cut", Method: http.MethodPost, Times: 1, Fault: ResetMidRequest, CutBytes: 1000}); err != nil {
		t.Fatal(err)
	}
	big := `{"_id":"big","pad":"` + strings.Repeat("x", 4<<20) + `"}`
	if a := do(t, http.MethodPost, p.URL+"/"+db, big); a.err == nil {
		t.Fatalf("a request reset while it was sent succeeded: %d", a.status)
	}
	if docExists(t, s, db, "big") {
		t.Error("the cut request reached the server")
	}
	if a := do(t, http.MethodPost, p.URL+"/"+db, big); a.status != http.StatusCreated {
		t.Errorf("next request: %d %s %v", a.status, a.body, a.err)
	}
	if st := p.Rule("cut"); st.Fired != 1 {
		t.Errorf("rule fired %d times", st.Fired)
	}
}

func TestProxy_MaxBodyBytes(t *testing.T) {
	p, s, db := setup(t)
	p.SetLimits(Limits{MaxBodyBytes: 1000})
	big := `{"_id":"big","pad":"` + strings.Repeat("x", 2000) + `"}`
	a := do(t, http.MethodPost, p.URL+"/"+db, big)
	if a.status != http.StatusRequestEntityTooLarge || !bytes.Contains(a.body, []byte(`"too_large"`)) {
		t.Errorf("oversized body: %d %s %v, want 413 too_large", a.status, a.body, a.err)
	}
	if docExists(t, s, db, "big") {
		t.Error("oversized body reached the server")
	}
	if a := do(t, http.MethodPost, p.URL+"/"+db, `{"_id":"small"}`); a.status != http.StatusCreated {
		t.Errorf("small body: %d %s", a.status, a.body)
	}
	if st := p.Stats(); st.TooLarge != 1 || st.Faults != 1 {
		t.Errorf("stats = %+v, want 1 too large", st)
	}
}

// MaxInFlight: two requests are held in the proxy (a long delay that
// ends when their clients give up); while they are, every other request
// is answered 429 at once. No timing: the test waits for the proxy to
// count the two in flight, and cancels them when done.
func TestProxy_MaxInFlight(t *testing.T) {
	p, _, _ := setup(t)
	p.SetLimits(Limits{MaxInFlight: 2, RetryAfter: "1"})
	if err := p.SetRules(Rule{Name: "hold", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	held := make([]error, 2)
	for i := range held {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/", nil)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			held[i] = err
		})
	}
	waitFor(t, "2 requests in flight", func() bool { return p.Stats().InFlight == 2 })
	for range 4 {
		a := do(t, http.MethodGet, p.URL+"/", "")
		if a.status != 429 || a.header.Get("Retry-After") != "1" {
			t.Errorf("request beyond MaxInFlight: %d %v Retry-After %q, want 429 with Retry-After 1", a.status, a.err, a.header.Get("Retry-After"))
		}
	}
	cancel()
	wg.Wait()
	for _, err := range held {
		if err == nil {
			t.Error("a held request was answered: the hold rule did not apply")
		}
	}
	st := p.Stats()
	if st.MaxInFlight != 3 || st.Throttled != 4 || st.Rules["hold"].Fired != 2 {
		t.Errorf("stats = %+v, want MaxInFlight 3, Throttled 4, hold fired twice", st)
	}
}

// waitFor waits for cond, checked every millisecond, for at most a
// minute (a condition, not a sleep: it returns as soon as cond holds).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestProxy_RateLimit(t *testing.T) {
	p, _, _ := setup(t)
	p.SetLimits(Limits{RatePerSec: 5})
	throttled := 0
	for range 20 {
		if do(t, http.MethodHead, p.URL+"/", "").status == 429 {
			throttled++
		}
	}
	if throttled < 10 {
		t.Errorf("%d of 20 back-to-back requests throttled at 5/s, want most", throttled)
	}
	p.SetLimits(Limits{})
	if a := do(t, http.MethodHead, p.URL+"/", ""); a.status != 200 {
		t.Errorf("after removing limits: %d", a.status)
	}
}

func TestProxy_RejectDocs(t *testing.T) {
	p, s, db := setup(t)
	if err := p.SetRules(Rule{Name: "vdu", Fault: RejectDocs, DocIDs: []string{"bad", "worse"}, Reason: "nope"}); err != nil {
		t.Fatal(err)
	}
	t.Run("bulk new_edits true", func(t *testing.T) {
		a := do(t, http.MethodPost, p.URL+"/"+db+"/_bulk_docs", `{"docs":[{"_id":"ok1"},{"_id":"bad"},{"_id":"ok2"}]}`)
		var rows []struct{ ID, Rev, Error, Reason string }
		if err := json.Unmarshal(a.body, &rows); err != nil || a.status != http.StatusCreated {
			t.Fatalf("answer %d %s", a.status, a.body)
		}
		byID := map[string]string{}
		for _, r := range rows {
			byID[r.ID] = r.Error + "/" + r.Reason
		}
		if len(rows) != 3 || byID["bad"] != "forbidden/nope" || byID["ok1"] != "/" || byID["ok2"] != "/" {
			t.Errorf("rows = %s", a.body)
		}
		if !docExists(t, s, db, "ok1") || !docExists(t, s, db, "ok2") || docExists(t, s, db, "bad") {
			t.Error("server content does not match the rejection")
		}
	})
	t.Run("bulk new_edits false", func(t *testing.T) {
		a := do(t, http.MethodPost, p.URL+"/"+db+"/_bulk_docs",
			`{"new_edits":false,"docs":[{"_id":"worse","_rev":"1-a"},{"_id":"ok3","_rev":"1-b"}]}`)
		if a.status != http.StatusCreated || !strings.Contains(string(a.body), `{"error":"forbidden","id":"worse","reason":"nope","rev":"1-a"}`) {
			t.Errorf("answer %d %s", a.status, a.body)
		}
		if !docExists(t, s, db, "ok3") || docExists(t, s, db, "worse") {
			t.Error("server content does not match the rejection")
		}
	})
	t.Run("bulk all rejected", func(t *testing.T) {
		before := p.Stats().Requests
		a := do(t, http.MethodPost, p.URL+"/"+db+"/_bulk_docs", `{"docs":[{"_id":"bad"}]}`)
		if a.status != http.StatusCreated || !strings.Contains(string(a.body), `"forbidden"`) {
			t.Errorf("answer %d %s", a.status, a.body)
		}
		if p.Stats().Requests != before+1 || docExists(t, s, db, "bad") {
			t.Error("unexpected requests or document")
		}
	})
	t.Run("single PUT", func(t *testing.T) {
		a := do(t, http.MethodPut, p.URL+"/"+db+"/bad", `{}`)
		if a.status != http.StatusForbidden || !strings.Contains(string(a.body), `"forbidden"`) {
			t.Errorf("answer %d %s", a.status, a.body)
		}
		if a := do(t, http.MethodPut, p.URL+"/"+db+"/fine", `{}`); a.status != http.StatusCreated {
			t.Errorf("PUT of another doc: %d %s", a.status, a.body)
		}
		if docExists(t, s, db, "bad") || !docExists(t, s, db, "fine") {
			t.Error("server content does not match the rejection")
		}
	})
	if rs := p.Rule("vdu"); rs.Docs != 4 || rs.Fired != 4 {
		t.Errorf("rule stats = %+v, want 4 docs in 4 requests", rs)
	}
}

func TestProxy_RulesChangeWhileRunning(t *testing.T) {
	p, _, _ := setup(t)
	if err := p.AddRule(Rule{Name: "down", Fault: Status, Status: 503}); err != nil {
		t.Fatal(err)
	}
	if a := do(t, http.MethodGet, p.URL+"/", ""); a.status != 503 {
		t.Errorf("with rule: %d", a.status)
	}
	if err := p.SetRules(); err != nil {
		t.Fatal(err)
	}
	if a := do(t, http.MethodGet, p.URL+"/", ""); a.status != 200 {
		t.Errorf("after clearing rules: %d", a.status)
	}
	p.ResetStats()
	if st := p.Stats(); st.Requests != 0 || st.Rules["down"].Fired != 0 {
		t.Errorf("after ResetStats: %+v", st)
	}
}

func TestProxy_StopClosesListener(t *testing.T) {
	s := couchtest.Shared(t)
	p, err := Start(s.URL, 7)
	if err != nil {
		t.Fatal(err)
	}
	p.Stop()
	_, err = http.Get(p.URL + "/")
	if err == nil {
		t.Fatal("proxy still answers after Stop")
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("want a refused connection, got a timeout: %v", err)
	}
}

// The oracle must still work when a server lacks _bulk_get (CouchDB 1.x):
// the proxy hides it and CompareDBs falls back to open_revs.
func TestCompareDBs_OpenRevsFallbackThroughProxy(t *testing.T) {
	p, s, a := setup(t)
	b := s.NewDB(t)
	doc := json.RawMessage(`{"_id":"x/y","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"v":1,"_attachments":{"t":{"content_type":"text/plain","revpos":2,"data":"aGk="}}}`)
	conflict := json.RawMessage(`{"_id":"x/y","_rev":"2-c","_revisions":{"start":2,"ids":["c","a"]},"v":2}`)
	c := s.Client()
	if _, err := c.BulkDocs(t.Context(), a, false, doc, conflict); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BulkDocs(t.Context(), b, false, doc); err != nil {
		t.Fatal(err)
	}
	if err := p.SetRules(Rule{Name: "no bulk_get", Method: http.MethodPost, Path: `/_bulk_get$`, Fault: Status, Status: 404}); err != nil {
		t.Fatal(err)
	}
	d, err := couchtest.CompareDBs(t.Context(), p.URL+"/"+a, p.URL+"/"+b, couchtest.CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Equal() || !strings.Contains(d.String(), "leaves differ") {
		t.Errorf("missing conflict not found: %s", d)
	}
	if _, err := c.BulkDocs(t.Context(), b, false, conflict); err != nil {
		t.Fatal(err)
	}
	couchtest.AssertEqual(t, p.URL+"/"+a, p.URL+"/"+b)
	if p.Rule("no bulk_get").Fired < 2 {
		t.Error("_bulk_get was not refused, so the fallback was not exercised")
	}
}

// TestProxy_QueryMatch: a rule with Query fires only on requests whose
// query string matches it.
func TestProxy_QueryMatch(t *testing.T) {
	p, _, db := setup(t)
	if err := p.SetRules(Rule{Name: "q", Method: http.MethodGet, Path: `/_changes$`, Query: `(^|&)feed=continuous(&|$)`, Fault: Status, Status: 503}); err != nil {
		t.Fatal(err)
	}
	if a := do(t, http.MethodGet, p.URL+"/"+db+"/_changes?feed=normal", ""); a.err != nil || a.status != http.StatusOK {
		t.Errorf("feed=normal: got %d %v, want 200 from the server", a.status, a.err)
	}
	if a := do(t, http.MethodGet, p.URL+"/"+db+"/_changes?since=0&feed=continuous&timeout=1", ""); a.err != nil || a.status != 503 {
		t.Errorf("feed=continuous: got %d %v, want the rule's 503", a.status, a.err)
	}
	if st := p.Rule("q"); st.Matched != 1 || st.Fired != 1 {
		t.Errorf("rule matched %d, fired %d; want 1 and 1", st.Matched, st.Fired)
	}
	if err := p.SetRules(Rule{Query: `(`}); err == nil {
		t.Error("a bad Query regexp was accepted")
	}
}
