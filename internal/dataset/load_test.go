package dataset

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeCouch is a minimal _bulk_docs endpoint: it records every revision
// written per database and refuses the ids listed in refuse.
type fakeCouch struct {
	mu      sync.Mutex
	dbs     map[string][]string // db -> ids written, in arrival order
	batches int
	maxRevs int
	refuse  map[string]bool
	deletes int
}

func (f *fakeCouch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	db := parts[0]
	switch {
	case r.Method == http.MethodPut && len(parts) == 1:
		if _, ok := f.dbs[db]; ok {
			w.WriteHeader(http.StatusPreconditionFailed)
			io.WriteString(w, `{"error":"file_exists"}`)
			return
		}
		f.dbs[db] = []string{}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"ok":true}`)
	case r.Method == http.MethodDelete && len(parts) == 1:
		delete(f.dbs, db)
		f.deletes++
		io.WriteString(w, `{"ok":true}`)
	case r.Method == http.MethodPost && len(parts) == 2 && parts[1] == "_bulk_docs":
		var req struct {
			NewEdits *bool `json:"new_edits"`
			Docs     []struct {
				ID  string `json:"_id"`
				Rev string `json:"_rev"`
			} `json:"docs"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.NewEdits == nil || *req.NewEdits {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.batches++
		f.maxRevs = max(f.maxRevs, len(req.Docs))
		var out []map[string]string
		for _, d := range req.Docs {
			if f.refuse[d.ID] {
				out = append(out, map[string]string{"id": d.ID, "rev": d.Rev, "error": "forbidden", "reason": "no"})
				continue
			}
			f.dbs[db] = append(f.dbs[db], d.ID)
			out = append(out, map[string]string{"id": d.ID, "rev": d.Rev, "ok": "true"})
		}
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(out)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func TestLoader_Load(t *testing.T) {
	f := &fakeCouch{dbs: map[string][]string{"s": {"old"}}, refuse: map[string]bool{"doc-00000007": true}}
	srv := httptest.NewServer(f)
	defer srv.Close()

	l := &Loader{BatchDocs: 10, Parallel: 3}
	res, err := l.Load(context.Background(), srv.URL+"/", Synth{Name: "s", Docs: 95, MinSize: 100}.DB())
	if err != nil {
		t.Fatal(err)
	}
	if res.Revs != 95 || res.Bytes == 0 || res.DB != "s" {
		t.Errorf("result %+v", res)
	}
	if len(res.Failures) != 1 || !strings.HasPrefix(res.Failures[0], "doc-00000007 1-") {
		t.Errorf("failures %q", res.Failures)
	}
	if f.deletes != 1 {
		t.Errorf("existing database deleted %d times, want 1", f.deletes)
	}
	if got := len(f.dbs["s"]); got != 94 {
		t.Errorf("server holds %d docs, want 94", got)
	}
	if f.batches != 10 || f.maxRevs != 10 {
		t.Errorf("%d batches of at most %d revisions, want 10 of 10", f.batches, f.maxRevs)
	}
}

func TestLoader_BatchBytes(t *testing.T) {
	f := &fakeCouch{dbs: map[string][]string{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	// Each revision carries a 3000-byte attachment (4000 base64 bytes), so
	// a 9000-byte budget fits two per batch.
	l := &Loader{BatchBytes: 9000}
	if _, err := l.Load(context.Background(), srv.URL, Synth{Name: "b", Docs: 7, MinSize: 60, Atts: []int{3000}}.DB()); err != nil {
		t.Fatal(err)
	}
	if f.batches != 4 || f.maxRevs != 2 {
		t.Errorf("%d batches of at most %d revisions, want 4 of 2", f.batches, f.maxRevs)
	}
}

func TestLoader_Errors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			w.WriteHeader(http.StatusCreated)
			return
		}
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		io.WriteString(w, `{"error":"too_large"}`)
	}))
	defer srv.Close()
	u := strings.Replace(srv.URL, "http://", "http://admin:s3cret@", 1)
	_, err := (&Loader{}).Load(context.Background(), u, Synth{Name: "e", Docs: 3, MinSize: 60}.DB())
	if err == nil || !strings.Contains(err.Error(), "HTTP 413") {
		t.Fatalf("err = %v, want HTTP 413", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error leaks the password: %v", err)
	}

	// A generator error stops the load and is returned.
	bad := DB{Name: "g", Revs: 1, Each: func(func([]byte) error) error { return io.ErrUnexpectedEOF }}
	if _, err := (&Loader{}).Load(context.Background(), srv.URL, bad); err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Errorf("generator error: %v", err)
	}
}

func TestLoader_LoadAll(t *testing.T) {
	f := &fakeCouch{dbs: map[string][]string{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	var dbs []DB
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		dbs = append(dbs, Synth{Name: n, Docs: 30, MinSize: 80}.DB())
	}
	res, err := (&Loader{DBParallel: 2, BatchDocs: 7}).LoadAll(context.Background(), srv.URL, dbs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.DB != dbs[i].Name || r.Revs != 30 || len(f.dbs[r.DB]) != 30 {
			t.Errorf("db %d: %+v, server holds %d", i, r, len(f.dbs[r.DB]))
		}
	}
}

// TestLoader_NameEscaped: a database name with "/" and "+" is one path
// segment of the requests ("%2F", "%2B"), as CouchDB needs it.
func TestLoader_NameEscaped(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.Method+" "+r.URL.EscapedPath())
		if r.Method == "PUT" {
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"ok":true}`))
			return
		}
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`[]`))
	}))
	defer srv.Close()
	if _, err := (&Loader{}).Load(context.Background(), srv.URL, Synth{Name: "m/db+$(0)", Docs: 1, MinSize: 10}.DB()); err != nil {
		t.Fatal(err)
	}
	if len(paths) < 2 || paths[0] != "PUT /m%2Fdb%2B$%280%29" && paths[0] != "PUT /m%2Fdb%2B$(0)" || !strings.HasPrefix(paths[1], "POST /m%2Fdb%2B") {
		t.Errorf("requests %q, want the name as one escaped path segment", paths)
	}
}
