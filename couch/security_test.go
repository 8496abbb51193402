package couch

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

// CouchDB 3.x gives a new database an admin-only `_security` (canned
// answers: PouchDB Server's default is `{}`). Copying a source's `{}`
// into a database just created there must therefore write it, while a
// source object equal to the default needs no write. The default is read
// once per server. Likewise a new database's `_revs_limit` is 1000.
func TestSetMetadata_FreshDatabase(t *testing.T) {
	const adminOnly = `{"members":{"roles":["_admin"]},"admins":{"roles":["_admin"]}}`
	var mu sync.Mutex
	var log []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		log = append(log, r.Method+" "+r.URL.Path+" "+string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/":
			io.WriteString(w, `{"couchdb":"Welcome","version":"3.3.3","uuid":"u1"}`)
		case r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/_security"):
			io.WriteString(w, adminOnly)
		case r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/_revs_limit"):
			io.WriteString(w, "1000\n")
		default:
			io.WriteString(w, `{"ok":true}`)
		}
	}))
	defer srv.Close()
	ep, err := Probe(context.Background(), srv.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	set := func(name, sec string, fresh bool) {
		d := ep.Server.OpenDB(name, DBOptions{Fresh: fresh})
		if err := d.SetMetadata(ctx, replicate.Metadata{Security: []byte(sec)}, replicate.AfterDocs); err != nil {
			t.Fatal(err)
		}
	}
	set("a", `{}`, true)                                                             // differs from the default: written
	set("b", `{"admins":{"roles":["_admin"]},"members":{"roles":["_admin"]}}`, true) // equal (key order aside): skipped
	set("c", adminOnly, false)                                                       // not created by us, equal: read, not written
	set("c2", `{}`, false)                                                           // not created by us, differs: read, written
	// _revs_limit: the default of a new database is not set again; an
	// existing database's is read and set when it differs.
	for _, c := range []struct {
		name  string
		limit int
		fresh bool
	}{{"d", 1000, true}, {"e", 1000, false}, {"f", 7, true}, {"g", 5, false}} {
		d := ep.Server.OpenDB(c.name, DBOptions{Fresh: c.fresh})
		if err := d.SetMetadata(ctx, replicate.Metadata{RevsLimit: c.limit}, replicate.BeforeDocs); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"GET / ",
		"GET /a/_security ",
		"PUT /a/_security {}",
		"GET /c/_security ",
		"GET /c2/_security ",
		"PUT /c2/_security {}",
		"GET /e/_revs_limit ",
		"PUT /f/_revs_limit 7",
		"GET /g/_revs_limit ",
		"PUT /g/_revs_limit 5",
	}
	if strings.Join(log, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
}
