package replicate_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/replicate"
)

// TestRecreatedDocAttachmentBytes: a document deleted and created again
// on the source with an attachment of the same name but other bytes.
// CouchDB gives that attachment revpos 1 (its revision 3-z over 2-y,
// deleted, over 1-x), and the target holds 1-x with the old attachment
// of that name: sent as a stub, the target would fill it with the old
// bytes, silently. The second run sends its bytes; the copy is equal,
// attachment bytes included. Beside it, a document edited with its
// attachment unchanged still goes with a stub: its attachment is not
// read again.
func TestRecreatedDocAttachmentBytes(t *testing.T) {
	srv, src, tgt, sdb, tdb := pair(t)
	ctx := t.Context()
	c := srv.Client()
	att := func(data string) map[string]any {
		return map[string]any{"a": map[string]any{"content_type": "text/plain", "data": b64([]byte(data))}}
	}
	rev1, err := c.PutDoc(ctx, src, "d", map[string]any{"_attachments": att("one")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(ctx, src, "e", map[string]any{"v": 1, "_attachments": att("kept")}); err != nil {
		t.Fatal(err)
	}
	runOK(t, sdb, tdb, replicate.Options{})

	if _, err := c.Do(ctx, http.MethodDelete, "/"+couchtest.EscapeDB(src)+"/d?rev="+url.QueryEscape(rev1), nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(ctx, src, "d", map[string]any{"_attachments": att("two")}); err != nil {
		t.Fatal(err)
	}
	var e map[string]any
	if err := c.GetJSON(ctx, "/"+couchtest.EscapeDB(src)+"/e", &e); err != nil {
		t.Fatal(err)
	}
	e["v"] = 2
	if _, err := c.PutDoc(ctx, src, "e", e); err != nil {
		t.Fatal(err)
	}

	res := runOK(t, sdb, tdb, replicate.Options{})
	if got := attachmentBytes(t, srv.DBURL(tgt)+"/d/a"); string(got) != "two" {
		t.Errorf("target d/a = %q, want %q (the recreated document's bytes)", got, "two")
	}
	couchtest.AssertEqual(t, srv.DBURL(src), srv.DBURL(tgt), pouch)
	// d's new bytes are read; e's attachment, which the target holds, is not.
	if res.Stats.AttachmentsRead != 1 {
		t.Errorf("second run read %d attachments, want 1 (d's; e's goes as a stub)", res.Stats.AttachmentsRead)
	}
}

// attachmentBytes GETs one attachment's bytes at u (credentials in it).
func attachmentBytes(t *testing.T, u string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v: %s", u, resp.StatusCode, err, bytes.TrimSpace(b))
	}
	return b
}
