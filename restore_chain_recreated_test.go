package sofa_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestRestore_ChainRecreatedAttachment: a full backup holds document d
// with attachment a ("one"); d is then deleted and created again with an
// attachment a of other bytes ("two"), which CouchDB gives revpos 1 (its
// revision 3-z over 2-y, deleted, over 1-x); an incremental backup holds
// 3-z with its bytes. Restoring the chain into a fresh server writes 1-x
// first: sent as a stub, 3-z's attachment would be filled from 1-x's,
// the old bytes, silently. The restored database equals the source,
// attachment bytes included.
func TestRestore_ChainRecreatedAttachment(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "CouchDB gives an attachment of a recreated document revpos 1")
	ctx := t.Context()
	src := couchtest.Start(t)
	c := src.Client()
	if err := c.CreateDB(ctx, "rc"); err != nil {
		t.Fatal(err)
	}
	att := func(data string) map[string]any {
		return map[string]any{"a": map[string]any{"content_type": "text/plain", "data": base64.StdEncoding.EncodeToString([]byte(data))}}
	}
	rev1, err := c.PutDoc(ctx, "rc", "d", map[string]any{"_attachments": att("one")})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	server := openAt(t, src.URL, nil)
	full := openAt(t, filepath.Join(dir, "full.sofa"), nil)
	if sum, err := sofa.Backup(ctx, server, full, sofa.BackupOptions{}); err != nil || !sum.Complete() {
		t.Fatalf("full backup: %+v, %v", sum, err)
	}
	if _, err := c.Do(ctx, http.MethodDelete, "/rc/d?rev="+url.QueryEscape(rev1), nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(ctx, "rc", "d", map[string]any{"_attachments": att("two")}); err != nil {
		t.Fatal(err)
	}
	inc := openAt(t, filepath.Join(dir, "inc.sofa"), nil)
	if sum, err := sofa.Backup(ctx, server, inc, sofa.BackupOptions{Since: full.Archive()}); err != nil || !sum.Complete() {
		t.Fatalf("incremental backup: %+v, %v", sum, err)
	}

	dst := couchtest.StartKind(t, src.Kind)
	if ws := restoreWarnings(t, []*sofa.Endpoint{full, inc}, dst, sofa.RestoreOptions{}); len(ws) > 0 {
		t.Errorf("restore warnings: %q", ws)
	}
	couchtest.AssertEqual(t, src.URL+"/rc", dst.URL+"/rc")
}
