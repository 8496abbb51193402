package couch

import (
	"errors"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/replicate"
)

// A multipart PUT answered 401 for a wrong password (the account's
// password changed while the run went on) is the request's refusal, an
// error matching replicate.ErrDenied, not the document's (a DocError
// would let the run go on, one failed login per such document, until
// CouchDB locks the account).
func TestWriteStreamed_WrongPasswordIsNoDocError(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "CouchDB's accounts")
	ctx := t.Context()
	srv := couchtest.StartWith(t, couchtest.Options{Users: map[string]string{"mem": "old-pw"}})
	c := srv.Client()
	if err := c.CreateDB(ctx, "memdb"); err != nil {
		t.Fatal(err)
	}
	if err := c.PutSecurity(ctx, "memdb", couchtest.Security{Members: couchtest.Group{Names: []string{"mem"}}}); err != nil {
		t.Fatal(err)
	}
	ep, err := Probe(ctx, srv.UserURL("mem", "old-pw")+"/memdb", Options{RetryTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	db := ep.Server.DB("memdb")
	if err := c.ChangeUserPassword(ctx, "mem", "old-pw", "new-pw", "memdb"); err != nil {
		t.Fatal(err)
	}
	data := []byte("attachment bytes")
	doc := &replicate.Doc{ID: "d", Rev: "1-a", Body: []byte(`{"_id":"d","_rev":"1-a"}`), Revisions: replicate.Revisions{Start: 1, IDs: []string{"a"}},
		Atts: []*replicate.Attachment{{Name: "f", ContentType: "text/plain", RevPos: 1, Length: int64(len(data)), Data: data}}}
	de, err := db.WriteStreamed(ctx, doc, nil)
	if de != nil || !errors.Is(err, replicate.ErrDenied) {
		t.Fatalf("WriteStreamed: DocError %+v, error %v; want no DocError and an error matching ErrDenied", de, err)
	}
}
