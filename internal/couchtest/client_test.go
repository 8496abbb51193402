package couchtest

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestClient_ReadRetriesAllDBsActive: a read answered 500 all_dbs_active
// (a server at max_dbs_open) is asked again, so that the oracle does not
// fail for the server's momentary state; other 500s and writes are not.
func TestClient_ReadRetriesAllDBsActive(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" && n.Add(1) <= 2 {
			w.WriteHeader(500)
			w.Write([]byte(`{"error":"error","reason":"all_dbs_active"}`))
			return
		}
		if r.URL.Path == "/broken" {
			n.Add(1)
			w.WriteHeader(500)
			w.Write([]byte(`{"error":"unknown_error","reason":"badarg"}`))
			return
		}
		w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL}
	if status, err := c.Do(t.Context(), "GET", "/busy", nil, nil); status != 200 || err != nil || n.Load() != 3 {
		t.Errorf("GET /busy: %d, %v after %d requests; want 200 after 3", status, err, n.Load())
	}
	n.Store(0)
	if status, _ := c.Do(t.Context(), "GET", "/broken", nil, nil); status != 500 || n.Load() != 1 {
		t.Errorf("GET /broken: %d after %d requests; want 500 after 1", status, n.Load())
	}
}
