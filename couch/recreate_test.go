package couch

import (
	"errors"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// TestCreateDBAfterDelete: CouchDB may answer 412 file_exists to the
// PUT that follows a DELETE of the same database while it no longer
// exists (its database cache lags; 3 in 384 such pairs under load).
// restore --replace then left the database deleted. A 412 for a
// database GET calls missing is retried; one that exists is ErrExists.
func TestCreateDBAfterDelete(t *testing.T) {
	srv := couchtest.Start(t)
	p := faultproxy.StartT(t, srv.URL)
	ep, err := Probe(t.Context(), p.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := ep.Server
	lag := faultproxy.Rule{Name: "lag", Method: "PUT", Path: `^/gone$`, Times: 3, Fault: faultproxy.Status, Status: 412,
		Body: `{"error":"file_exists","reason":"The database could not be created, the file already exists."}`}
	if err := p.SetRules(lag); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateDBAfterDelete(t.Context(), "gone", CreateOptions{}); err != nil {
		t.Fatalf("after three 412s for a missing database: %v", err)
	}
	if st := p.Rule("lag"); st.Fired != 3 {
		t.Errorf("the 412 fired %d times, want 3", st.Fired)
	}
	if _, err := s.DB("gone").Info(t.Context()); err != nil {
		t.Errorf("the database was not created: %v", err)
	}
	if err := s.CreateDBAfterDelete(t.Context(), "gone", CreateOptions{}); !errors.Is(err, ErrExists) {
		t.Errorf("a database that exists: %v, want ErrExists", err)
	}
}
