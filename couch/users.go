package couch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/sofadb/sofa/replicate"
)

// What a copy of the system databases means between vendors (see the
// README, "System databases"):
//
//   - `_design/_auth` in `_users` and `_design/_replicator` in
//     `_replicator` belong to the server: each vendor keeps its own
//     (PouchDB Server writes both, CouchDB 3.5 `_design/_auth` when it
//     first uses `_users`), with functions
//     for that server. sofa never reads them from a source (nor counts
//     them in doc_count), never writes them into a target, and verify
//     never compares them.
//   - `_users/_security` is the server's too: CouchDB refuses every write
//     to it (403). sofa writes it only when it differs from the target's,
//     and a refusal is a warning (replicate.ErrMetadataRefused), not a
//     failure.

// UsersDB is the name of the authentication database.
const UsersDB = "_users"

// serverOwned maps system databases to the documents the server writes
// into them itself.
var serverOwned = map[string]string{
	UsersDB:       "_design/_auth",
	"_replicator": "_design/_replicator",
}

// ServerOwned reports whether document id of database db belongs to the
// server rather than to its users: it is never copied nor compared.
func ServerOwned(db, id string) bool {
	own, ok := serverOwned[db]
	return ok && id == own
}

// ownedLive reports whether the server's own document of this database
// exists (live), so that doc_count can leave it out.
func (d *DB) ownedLive(ctx context.Context) (bool, error) {
	id, ok := serverOwned[d.name]
	if !ok {
		return false, nil
	}
	resp, err := d.srv.do(ctx, &request{Method: "HEAD", Path: d.path + "/" + EscapeDocID(id)})
	if StatusOf(err) == 404 {
		return false, nil
	}
	if err != nil {
		return false, d.fail("read "+id, err)
	}
	resp.Body.Close()
	return true, nil
}

// skipServerOwned wraps a changes callback so that rows of documents the
// server owns are passed over (their seq still counts as read).
func (d *DB) skipServerOwned(fn func(replicate.Change) error) func(replicate.Change) error {
	if _, ok := serverOwned[d.name]; !ok {
		return fn
	}
	return func(c replicate.Change) error {
		if ServerOwned(d.name, c.ID) {
			return nil
		}
		return fn(c)
	}
}

// withoutServerOwnedRevs drops the server's own documents from a
// `_revs_diff` question: the target then never asks for them.
func (d *DB) withoutServerOwnedRevs(revs map[string][]string) map[string][]string {
	if _, ok := revs[serverOwned[d.name]]; !ok {
		return revs
	}
	out := make(map[string][]string, len(revs))
	for id, r := range revs {
		if !ServerOwned(d.name, id) {
			out[id] = r
		}
	}
	return out
}

// withoutServerOwnedDocs drops the server's own documents from a write (an
// older archive may hold another server's `_design/_auth`).
func (d *DB) withoutServerOwnedDocs(docs []*replicate.Doc) []*replicate.Doc {
	if _, ok := serverOwned[d.name]; !ok {
		return docs
	}
	var out []*replicate.Doc
	for _, doc := range docs {
		if !ServerOwned(d.name, doc.ID) {
			out = append(out, doc)
		}
	}
	return out
}

// setUsersSecurity writes `_users/_security` only when it differs from
// what the target holds; a refusal (CouchDB never lets it be edited) is
// replicate.ErrMetadataRefused.
func (d *DB) setUsersSecurity(ctx context.Context, sec []byte) error {
	if resp, err := d.srv.do(ctx, &request{Method: "GET", Path: d.path + "/_security"}); err == nil {
		var have, want any
		derr := json.NewDecoder(resp.Body).Decode(&have)
		resp.Body.Close()
		if derr == nil && json.Unmarshal(sec, &want) == nil && reflect.DeepEqual(normSecurity(have), normSecurity(want)) {
			return nil
		}
	}
	resp, err := d.srv.do(ctx, &request{Method: "PUT", Path: d.path + "/_security", Body: sec, ContentType: "application/json"})
	if err != nil {
		if st := StatusOf(err); st == 403 || st == 401 {
			return fmt.Errorf("%w: %s/_security left as the target has it (%s): %w", replicate.ErrMetadataRefused, d.name, compactJSON(sec), err)
		}
		return d.fail("set _security", err)
	}
	resp.Body.Close()
	return nil
}

// normSecurity treats an empty `_security` and one with empty groups alike.
func normSecurity(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := map[string]any{}
	for k, g := range m {
		if gm, ok := g.(map[string]any); ok {
			inner := map[string]any{}
			for gk, gv := range gm {
				if l, ok := gv.([]any); ok && len(l) == 0 {
					continue
				}
				inner[gk] = gv
			}
			if len(inner) == 0 {
				continue
			}
			out[k] = inner
		} else {
			out[k] = g
		}
	}
	return out
}

func compactJSON(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}
