package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"archive/tar"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// `sofa restore` (issue 5, points 3 and 7): conformance cases through
// backup then restore, a whole server, order of writes, refusals, resume,
// selection and renames, pipes.

// arCase is one conformance case of docs/conformance.md,
// scaled down: the databases it creates on a source.
type arCase struct {
	name string
	load func(t *testing.T, srv *couchtest.Server)
	dbs  []string
}

var arPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")

func b64s(b []byte) string {
	out, _ := json.Marshal(b)
	return strings.Trim(string(out), `"`)
}

func arConformance() []arCase {
	return []arCase{
		{"A1", func(t *testing.T, s *couchtest.Server) {
			docs := []json.RawMessage{arRaw(`{"_id":"att","_attachments":{"note.txt":{"content_type":"text/plain","data":%q}}}`, b64s(bytes.Repeat([]byte("sofa "), 205)))}
			arCreate(t, s, "c-a1", true, append(docs, arSmallDocs("p", 10)...)...)
		}, []string{"c-a1"}},
		{"A2", func(t *testing.T, s *couchtest.Server) { // 1.7 MB scaled to 400 KB
			arCreate(t, s, "c-a2", true,
				arRaw(`{"_id":"random","_attachments":{"r.bin":{"content_type":"application/octet-stream","data":%q}}}`, b64s(arRandom(400<<10))),
				arRaw(`{"_id":"image","_attachments":{"i.png":{"content_type":"image/png","data":%q}}}`, b64s(arPNG)))
		}, []string{"c-a2"}},
		{"E1", func(t *testing.T, s *couchtest.Server) {
			for _, db := range []string{"a$b", "a(b)", "a-b_c"} {
				arCreate(t, s, db, true, arSmallDocs("e", 3)...)
			}
		}, []string{"a$b", "a(b)", "a-b_c"}},
		{"E2", func(t *testing.T, s *couchtest.Server) {
			arCreate(t, s, "c-e2", true, arRaw(`{"_id":"a+b"}`), arRaw(`{"_id":"a b"}`), arRaw(`{"_id":"a%%2Bb"}`), arRaw(`{"_id":"123+456"}`))
		}, []string{"c-e2"}},
		{"E3", func(t *testing.T, s *couchtest.Server) {
			arCreate(t, s, "c-e3", true, arRaw(`{"_id":"folder/file"}`), arRaw(`{"_id":"a/b/c"}`),
				arRaw(`{"_id":"_design/app","views":{"by_id":{"map":"function(d){emit(d._id)}"}}}`), arRaw(`{"_id":"_design/with/slash"}`))
		}, []string{"c-e3"}},
		{"E4", func(t *testing.T, s *couchtest.Server) {
			arCreate(t, s, "c-e4", true, append([]json.RawMessage{arRaw(`{"_id":%q}`, strings.Repeat("L", 20000))}, arSmallDocs("n", 10)...)...)
		}, []string{"c-e4"}},
		{"R1", func(t *testing.T, s *couchtest.Server) {
			arCreate(t, s, "c-r1", false,
				arRaw(`{"_id":"r1","_rev":"5-e","v":5,"_revisions":{"start":5,"ids":["e","d","c","b","a"]}}`),
				arRaw(`{"_id":"r1","_rev":"3-y","_deleted":true,"_revisions":{"start":3,"ids":["y","x","a"]}}`))
		}, []string{"c-r1"}},
		{"R2", func(t *testing.T, s *couchtest.Server) { // 40 leaves scaled to 12
			var d []json.RawMessage
			for i := range 12 {
				d = append(d, arRaw(`{"_id":"c","_rev":"2-h%02d","leaf":%d,"_revisions":{"start":2,"ids":["h%02d","root"]},"_attachments":{"leaf%d.bin":{"content_type":"application/octet-stream","revpos":2,"data":%q}}}`,
					i, i, i, i, b64s(arRandom(1024))))
			}
			arCreate(t, s, "c-r2", false, d...)
		}, []string{"c-r2"}},
		{"R3", func(t *testing.T, s *couchtest.Server) { // 1,500 updates scaled to 150
			if err := s.Client().CreateDB(t.Context(), "c-r3"); err != nil {
				t.Fatal(err)
			}
			rev := ""
			for i := range 150 {
				body := map[string]any{"n": i}
				if rev != "" {
					body["_rev"] = rev
				}
				r, err := s.Client().PutDoc(t.Context(), "c-r3", "hot", body)
				if err != nil {
					t.Fatal(err)
				}
				rev = r
			}
		}, []string{"c-r3"}},
		{"R4", func(t *testing.T, s *couchtest.Server) {
			arCreate(t, s, "c-r4", false, arRaw(`{"_id":"r4","_rev":"2-d","_deleted":true,"kept":"field","n":[1,2],"_revisions":{"start":2,"ids":["d","a"]}}`))
		}, []string{"c-r4"}},
		{"S1", func(t *testing.T, s *couchtest.Server) {
			secs := map[string]any{
				"c-s1-both":    couchtest.Security{Admins: couchtest.Group{Names: []string{"ann"}, Roles: []string{"ops"}}, Members: couchtest.Group{Names: []string{"bob"}, Roles: []string{"staff"}}},
				"c-s1-members": map[string]any{"members": map[string]any{"names": []string{"carl"}, "roles": []string{}}},
				"c-s1-empty":   map[string]any{},
			}
			for db, sec := range secs {
				arCreate(t, s, db, true, arSmallDocs("s", 3)...)
				if err := s.Client().PutSecurity(t.Context(), db, sec); err != nil {
					t.Fatal(err)
				}
			}
		}, []string{"c-s1-both", "c-s1-empty", "c-s1-members"}},
	}
}

// TestRestore_Conformance runs every conformance case through `sofa
// backup` of the whole server then `sofa restore` into an empty server,
// once per compression, and checks Equal (bodies, leaves, histories,
// attachments with digests, _security).
func TestRestore_Conformance(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	var dbs []string
	for _, c := range arConformance() {
		c.load(t, src)
		dbs = append(dbs, c.dbs...)
	}
	for _, comp := range []string{"zstd", "gzip", "none"} {
		t.Run(comp, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "conf.sofa")
			r := arSofa(t, bin, nil, "backup", src.URL, path, "--json", "--compression", comp, "--exclude", "_*")
			r.want(t, exitOK)
			if s := r.summary(t); s.DBsOK != len(dbs) || s.DocWriteFailures != 0 {
				t.Fatalf("backup summary: %d ok of %d, %d failures", s.DBsOK, len(dbs), s.DocWriteFailures)
			}
			tgt := couchtest.Start(t)
			r = arSofa(t, bin, nil, "restore", path, tgt.URL, "--json")
			r.want(t, exitOK)
			s := r.summary(t)
			if s.DBsOK != len(dbs) || s.DBsTotal != len(dbs) {
				t.Errorf("restore summary: %d ok of %d, want %d", s.DBsOK, s.DBsTotal, len(dbs))
			}
			for _, db := range dbs {
				arEqual(t, src, db, tgt, db)
			}
		})
	}
	// R2's second half: the target already holds an older copy of the
	// conflicted document.
	t.Run("R2 over an older copy", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "r2.sofa")
		arSofa(t, bin, nil, "backup", src.DBURL("c-r2"), path, "-q").want(t, exitOK)
		tgt := couchtest.Start(t)
		arCreate(t, tgt, "c-r2", false, arRaw(`{"_id":"c","_rev":"1-root","old":true}`))
		arSofa(t, bin, nil, "restore", path, tgt.URL, "-q", "--reuse-existing").want(t, exitOK)
		arEqual(t, src, "c-r2", tgt, "c-r2")
	})
}

// TestRestore_WholeServer50 round-trips a server of 50 databases plus
// _users (with a user) and _replicator: _users is restored, _replicator
// only with --with-replicator.
func TestRestore_WholeServer50(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)

	var names []string
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range 50 {
		name := fmt.Sprintf("srv-%02d", i)
		names = append(names, name)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c := src.Client()
			if err := c.CreateDB(t.Context(), name); err != nil {
				t.Error(err)
				return
			}
			docs := arSmallDocs(fmt.Sprintf("d%d-", i), 5+i)
			if i%5 == 0 {
				docs = append(docs, arRaw(`{"_id":"att%d","_attachments":{"f.bin":{"content_type":"application/octet-stream","data":%q}}}`, i, b64s(arRandom(2048+i))))
			}
			if _, err := c.BulkDocs(t.Context(), name, true, docs...); err != nil {
				t.Error(err)
			}
			if i%7 == 0 {
				if err := c.PutSecurity(t.Context(), name, couchtest.Security{Members: couchtest.Group{Names: []string{fmt.Sprint("u", i)}, Roles: []string{}}}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()

	if err := src.Client().CreateUser(t.Context(), "ann", "pw", "ops"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "server.sofa")
	r := arSofa(t, bin, nil, "backup", src.URL, path, "--json")
	r.want(t, exitOK)
	if s := r.summary(t); s.DBsOK != 52 {
		t.Fatalf("backup: %d ok, want 52 (50 + _users + _replicator)", s.DBsOK)
	}

	tgt := couchtest.Start(t)
	r = arSofa(t, bin, nil, "restore", path, tgt.URL, "--json")
	r.want(t, exitOK)
	s := r.summary(t)
	var restored []string
	for _, d := range s.DBs {
		restored = append(restored, d.Name)
		if d.Status != fleet.StatusOK {
			t.Errorf("%s: %s %s", d.Name, d.Status, d.Error)
		}
	}
	if slices.Contains(restored, "_replicator") {
		t.Error("_replicator restored without --with-replicator")
	}
	// ... and the summary says it was left out, and why.
	if len(s.LeftOut) != 1 || s.LeftOut[0].Name != "_replicator" || !strings.Contains(s.LeftOut[0].Reason, "--with-replicator") {
		t.Errorf("left_out %+v, want _replicator with a --with-replicator hint", s.LeftOut)
	}
	if !slices.Contains(restored, "_users") || len(restored) != 51 {
		t.Errorf("restored %d databases (%v), want the 50 and _users", len(restored), restored)
	}
	for _, n := range names {
		arEqual(t, src, n, tgt, n)
	}
	// verify of the archive against the restored server leaves
	// _replicator out as the restore did, and says so.
	r = arSofa(t, bin, nil, "verify", path, tgt.URL)
	r.want(t, exitOK)
	if !strings.Contains(r.stderr, `database "_replicator" not compared`) {
		t.Errorf("verify after a default restore does not say _replicator was left out:\n%s", r.stderr)
	}
	// _users: the user's document, with its history. _design/_auth is the
	// server's own (CouchDB writes one when it first uses _users), and
	// never copied.
	var ua, ub map[string]any
	for i, s := range []*couchtest.Server{src, tgt} {
		out := &ua
		if i == 1 {
			out = &ub
		}
		if err := s.Client().GetJSON(t.Context(), "/_users/org.couchdb.user:ann?revs=true", out); err != nil {
			t.Fatalf("_users: ann: %v", err)
		}
	}
	if !reflect.DeepEqual(ua, ub) {
		t.Errorf("_users: ann differs:\n%v\n%v", ua, ub)
	}

	// --with-replicator also restores _replicator, into the one the
	// server created itself.
	tgt2 := couchtest.Start(t)
	r = arSofa(t, bin, nil, "restore", path, tgt2.URL, "--json", "--with-replicator", "--include", "_*")
	r.want(t, exitOK)
	if s := r.summary(t); s.DBsOK != 2 || len(s.LeftOut) != 0 {
		t.Errorf("--with-replicator --include '_*': %d ok, want 2: %+v; left out %+v, want none", s.DBsOK, s.DBs, s.LeftOut)
	}
	arEqual(t, src, "_replicator", tgt2, "_replicator")
	arSofa(t, bin, nil, "verify", path, tgt2.URL, "--with-replicator", "--include", "_*").want(t, exitOK)
}

// TestRestore_Order records the requests a restore sends to the target:
// the database is created first, _revs_limit is set before any document,
// design documents are written after every other document, _security
// last. A validate_doc_update that refuses every other document must not
// block the restore (it would, written first).
func TestRestore_Order(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	docs := arSmallDocs("d", 300)
	docs = append(docs, arRaw(`{"_id":"_design/guard","validate_doc_update":"function(newDoc){ if (newDoc._id.indexOf('_design/') !== 0 && !newDoc.allowed) { throw({forbidden: 'not allowed'}); } }"}`))
	arCreate(t, src, "ordered", true, docs...)
	// later writes would be refused by the guard; these were there before
	if err := src.Client().PutSecurity(t.Context(), "ordered", couchtest.Security{Members: couchtest.Group{Names: []string{"m"}, Roles: []string{}}}); err != nil {
		t.Fatal(err)
	}
	if src.Kind == couchtest.CouchDB { // the source holds what the archive will say
		if err := src.Client().PutJSON(t.Context(), "/ordered/_revs_limit", 777, nil); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "ordered.sofa")
	// version 2: meta.json and manifest.json members of their own, to edit
	arSofa(t, bin, nil, "backup", src.DBURL("ordered"), path, "-q", "--compression", "none", "--archive-version", "2").want(t, exitOK)
	// PouchDB Server has no _revs_limit: give the archive one, as a
	// CouchDB source would, so the restore has to set it.
	withLimit := filepath.Join(dir, "limit.sofa")
	data, _ := os.ReadFile(path)
	data = rewriteArchive(t, data, func(h *tar.Header, body []byte) (bool, []byte) {
		if strings.HasSuffix(h.Name, "/meta.json") || strings.HasSuffix(h.Name, "/end.json") {
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatal(err)
			}
			md, _ := m["metadata"].(map[string]any)
			if md == nil {
				md = map[string]any{}
			}
			md["revs_limit"] = 777
			m["metadata"] = md
			nb, _ := json.Marshal(m)
			nb = append(nb, '\n')
			reseal(h, nb, nb)
			return true, nb
		}
		return true, body
	})
	if err := os.WriteFile(withLimit, fixManifest(t, data), 0o644); err != nil {
		t.Fatal(err)
	}

	tgt := couchtest.Start(t)
	rec := startRecorder(t, tgt.URL)
	r := arSofa(t, bin, nil, "restore", withLimit, rec.URL, "--json", "--write-batch-docs", "50")
	r.want(t, exitOK)
	arEqual(t, src, "ordered", tgt, "ordered")

	reqs := rec.requests()
	first := func(match func(recorded) bool) int { return slices.IndexFunc(reqs, match) }
	last := func(match func(recorded) bool) int {
		for i := len(reqs) - 1; i >= 0; i-- {
			if match(reqs[i]) {
				return i
			}
		}
		return -1
	}
	isPut := func(suffix string) func(recorded) bool {
		return func(r recorded) bool { return r.Method == "PUT" && strings.HasSuffix(r.Path, suffix) }
	}
	bulk := func(design bool) func(recorded) bool {
		return func(r recorded) bool {
			return r.Method == "POST" && strings.HasSuffix(r.Path, "/_bulk_docs") &&
				slices.ContainsFunc(r.IDs, func(id string) bool { return strings.HasPrefix(id, "_design/") == design })
		}
	}
	create := first(func(r recorded) bool { return r.Method == "PUT" && r.Path == "/ordered" })
	limit := first(isPut("/_revs_limit"))
	firstDoc, lastDoc := first(bulk(false)), last(bulk(false))
	firstDesign := first(bulk(true))
	security := first(isPut("/_security"))
	lastWrite := last(func(r recorded) bool {
		return (r.Method == "PUT" || r.Method == "POST") && !strings.Contains(r.Path, "_local") && !strings.HasSuffix(r.Path, "/_revs_diff")
	})
	t.Logf("create %d, revs_limit %d, docs %d..%d, design %d, security %d, last write %d of %d requests", create, limit, firstDoc, lastDoc, firstDesign, security, lastWrite, len(reqs))
	switch {
	case create < 0 || firstDoc < 0 || firstDesign < 0 || security < 0:
		t.Fatalf("missing requests: %v", reqs)
	case limit < 0:
		t.Errorf("_revs_limit never set")
	case !(create < limit && limit < firstDoc):
		t.Errorf("_revs_limit (request %d) not set between creation (%d) and the first document (%d)", limit, create, firstDoc)
	}
	if firstDesign < lastDoc {
		t.Errorf("design document written (request %d) before the last other document (%d)", firstDesign, lastDoc)
	}
	if security != lastWrite {
		t.Errorf("_security set at request %d, but the last write is %d (%s)", security, lastWrite, reqs[lastWrite])
	}
}

// fixManifest recomputes manifest.json's member list after members were
// rewritten (sizes and checksums), as a careless tool would.
func fixManifest(t *testing.T, data []byte) []byte {
	t.Helper()
	var members []map[string]any
	var stored, raw int64
	var dbs []any
	var index, indexRaw []byte
	return rewriteArchive(t, data, func(h *tar.Header, body []byte) (bool, []byte) {
		switch h.Name {
		case "index.json.gz":
			// after the manifest, not listed in it; it holds the
			// manifest's summaries (its spans are left as they were:
			// the archive is read in order)
			index, indexRaw = fixIndex(t, body, dbs)
			reseal(h, index, indexRaw)
			return true, index
		case "footer.json":
			var f map[string]any
			if err := json.Unmarshal(body, &f); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(index)
			f["index_sha256"], f["index_size"], f["index_raw_size"] = hex.EncodeToString(sum[:]), len(index), len(indexRaw)
			nb, _ := json.Marshal(f)
			nb = append(nb, bytes.Repeat([]byte(" "), 511-len(nb))...)
			nb = append(nb, '\n')
			reseal(h, nb, nb)
			return true, nb
		}
		if h.Name != "manifest.json" {
			size := int64(len(body))
			rawSize := size
			fmt.Sscan(h.PAXRecords["SOFA.raw_size"], &rawSize)
			members = append(members, map[string]any{"name": h.Name, "size": size,
				"sha256": h.PAXRecords["SOFA.sha256"], "raw_size": rawSize, "raw_sha256": h.PAXRecords["SOFA.raw_sha256"]})
			stored += size
			raw += rawSize
			return true, body
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		m["members"] = members
		m["totals"].(map[string]any)["stored_bytes"] = stored
		m["totals"].(map[string]any)["raw_bytes"] = raw
		dbs, _ = m["databases"].([]any)
		if dbs, ok := m["databases"].([]any); ok {
			for _, d := range dbs {
				dm := d.(map[string]any)
				md, _ := dm["metadata"].(map[string]any)
				if md == nil {
					md = map[string]any{}
				}
				md["revs_limit"] = 777
				dm["metadata"] = md
			}
		}
		nb, _ := json.Marshal(m)
		reseal(h, nb, nb)
		return true, nb
	})
}

// fixIndex returns the index member body (gzip) with the summaries dbs
// (a manifest's databases), stored and raw.
func fixIndex(t *testing.T, body []byte, dbs []any) ([]byte, []byte) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	js, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var idx map[string]any
	if err := json.Unmarshal(js, &idx); err != nil {
		t.Fatal(err)
	}
	byDir := map[string]any{}
	for _, d := range dbs {
		byDir[d.(map[string]any)["dir"].(string)] = d
	}
	for _, d := range idx["databases"].([]any) {
		dm := d.(map[string]any)
		dm["summary"] = byDir[dm["summary"].(map[string]any)["dir"].(string)]
	}
	raw, _ := json.Marshal(idx)
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(raw)
	zw.Close()
	return z.Bytes(), raw
}

// TestRestore_NonEmptyTargetRefused: a target database holding other
// documents is refused (exit 3, named, untouched) unless --reuse-existing.
func TestRestore_NonEmptyTargetRefused(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "db", true, arSmallDocs("s", 20)...)
	arCreate(t, src, "other", true, arSmallDocs("o", 5)...)
	path := filepath.Join(t.TempDir(), "db.sofa")
	arSofa(t, bin, nil, "backup", src.URL, path, "-q", "--include", "db", "--include", "other").want(t, exitOK)

	tgt := couchtest.Start(t)
	arCreate(t, tgt, "db", true, arRaw(`{"_id":"theirs"}`))
	r := arSofa(t, bin, nil, "restore", path, tgt.URL, "--json")
	r.want(t, exitPartial)
	s := r.summary(t)
	for _, d := range s.DBs {
		switch d.Name {
		case "db":
			if d.Status != fleet.StatusFailed || !strings.Contains(d.Error, "--reuse-existing") {
				t.Errorf("db: %s %q, want failed naming --reuse-existing", d.Status, d.Error)
			}
		case "other":
			if d.Status != fleet.StatusOK {
				t.Errorf("other: %s %s", d.Status, d.Error)
			}
		}
	}
	if n := arDocCount(t, tgt, "db"); n != 1 {
		t.Fatalf("refused target changed: %d docs", n)
	}
	arEqual(t, src, "other", tgt, "other")
	// An existing empty database is fine; --reuse-existing writes into a
	// non-empty one.
	arCreate(t, tgt, "empty", true)
	arSofa(t, bin, nil, "restore", path, tgt.URL, "-q", "--include", "db", "--rename", "db=empty").want(t, exitOK)
	arEqual(t, src, "db", tgt, "empty")
	arSofa(t, bin, nil, "restore", path, tgt.URL, "-q", "--include", "db", "--reuse-existing").want(t, exitOK)
	if n := arDocCount(t, tgt, "db"); n != 21 {
		t.Errorf("after --reuse-existing: %d docs, want 21", n)
	}
}

// TestRestore_KillAndResume kills a restore with SIGKILL while it writes
// (the proxy slows _bulk_docs), reruns the same command: it is not refused
// as a non-empty target, and ends complete and equal. The database holds
// a design document early in its history, which the restore holds back to
// the end.
func TestRestore_KillAndResume(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	docs := append([]json.RawMessage{arRaw(`{"_id":"_design/early","views":{"v":{"map":"function(d){emit(d.i)}"}}}`)}, arSmallDocs("k", 3000)...)
	arCreate(t, src, "big", true, docs...)
	path := filepath.Join(t.TempDir(), "big.sofa")
	arSofa(t, bin, nil, "backup", src.DBURL("big"), path, "-q").want(t, exitOK)

	tgt := couchtest.Start(t)
	px := faultproxy.StartT(t, tgt.URL)
	if err := px.SetRules(faultproxy.Rule{Name: "slow", Method: "POST", Path: `/_bulk_docs$`, Delay: 150 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	args := []string{"restore", path, px.URL, "-q", "--write-batch-docs", "100", "--batch-size", "100", "--checkpoint-interval", "100ms", "--workers", "2"}
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for px.Rule("slow").Fired < 8 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("restore ended before the kill (%v): %s", cmd.ProcessState, stderr.String())
	}
	n := arDocCount(t, tgt, "big")
	if n == 0 || n >= 3001 {
		t.Fatalf("killed at %d docs: not mid-run", n)
	}
	t.Logf("killed after %d of 3001 docs", n)
	px.SetRules()
	r := arSofa(t, bin, nil, append(args[:3], "--json")...)
	r.want(t, exitOK)
	arEqual(t, src, "big", tgt, "big")
}

// TestRestore_SelectAndRename: --include/--exclude pick databases,
// --rename OLD=NEW restores under another name, a database URL target
// takes one database.
func TestRestore_SelectAndRename(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	for _, db := range []string{"app-a", "app-b", "log"} {
		arCreate(t, src, db, true, arSmallDocs(db, 4)...)
	}
	path := filepath.Join(t.TempDir(), "sel.sofa")
	arSofa(t, bin, nil, "backup", src.URL, path, "-q", "--exclude", "_*").want(t, exitOK)
	tgt := couchtest.Start(t)
	r := arSofa(t, bin, nil, "restore", path, tgt.URL, "--json", "--include", "app-*", "--exclude", "app-b", "--rename", "app-a=copy-a")
	r.want(t, exitOK)
	if s := r.summary(t); s.DBsTotal != 1 || s.DBs[0].Name != "copy-a" {
		t.Fatalf("restored %+v, want copy-a only", s.DBs)
	}
	arEqual(t, src, "app-a", tgt, "copy-a")
	for _, db := range []string{"app-a", "app-b", "log"} {
		if arDBExists(t, tgt, db) {
			t.Errorf("%s restored though not selected", db)
		}
	}
	// a database URL target with one database selected
	arSofa(t, bin, nil, "restore", path, tgt.DBURL("just-log"), "-q", "--include", "log").want(t, exitOK)
	arEqual(t, src, "log", tgt, "just-log")
	// ... and with several: a usage error, nothing half done
	r = arSofa(t, bin, nil, "restore", path, tgt.DBURL("many"), "-q")
	if r.code == exitOK {
		t.Fatal("restore of three databases into one database URL succeeded")
	}
	// a selection that matches nothing
	r = arSofa(t, bin, nil, "restore", path, tgt.URL, "-q", "--include", "nothing")
	if r.code == exitOK {
		t.Fatal("restore of no database succeeded")
	}
	// ... and into a database URL: said as such, with what the archive
	// holds
	r = arSofa(t, bin, nil, "restore", path, tgt.DBURL("none"), "-q", "--include", "nothing")
	r.want(t, exitUsage)
	if !strings.Contains(r.stderr, "no database of the archive matches --include nothing") || !strings.Contains(r.stderr, "app-a, app-b, log") {
		t.Errorf("restore into a database URL, nothing selected: %q", r.stderr)
	}
	// bad --rename
	arSofa(t, bin, nil, "restore", path, tgt.URL, "--rename", "nonsense").want(t, exitUsage)
}

// TestRestore_Pipe: `sofa backup URL - | sofa restore - URL`, for one
// database and for a server.
func TestRestore_Pipe(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "p1", true, append(arSmallDocs("x", 500), arRaw(`{"_id":"att","_attachments":{"a.bin":{"content_type":"application/octet-stream","data":%q}}}`, b64s(arRandom(100<<10))))...)
	arCreate(t, src, "p2", false, arRaw(`{"_id":"r","_rev":"3-c","_revisions":{"start":3,"ids":["c","b","a"]}}`), arRaw(`{"_id":"r","_rev":"2-z","_deleted":true,"_revisions":{"start":2,"ids":["z","a"]}}`))
	tgt := couchtest.Start(t)
	pipe := func(backupArgs, restoreArgs []string) {
		t.Helper()
		b := exec.Command(bin, backupArgs...)
		rs := exec.Command(bin, restoreArgs...)
		pr, pw := io.Pipe()
		b.Stdout, rs.Stdin = pw, pr
		var be, re, ro bytes.Buffer
		b.Stderr, rs.Stderr, rs.Stdout = &be, &re, &ro
		if err := rs.Start(); err != nil {
			t.Fatal(err)
		}
		if err := b.Start(); err != nil {
			t.Fatal(err)
		}
		berr := b.Wait()
		pw.Close()
		rerr := rs.Wait()
		if berr != nil || rerr != nil {
			t.Fatalf("backup: %v\n%s\nrestore: %v\n%s\n%s", berr, be.String(), rerr, re.String(), ro.String())
		}
	}
	pipe([]string{"backup", src.DBURL("p1"), "-", "-q"}, []string{"restore", "-", tgt.DBURL("p1-copy"), "-q"})
	arEqual(t, src, "p1", tgt, "p1-copy")
	pipe([]string{"backup", src.URL, "-", "-q", "--exclude", "_*"}, []string{"restore", "-", tgt.URL, "-q"})
	arEqual(t, src, "p1", tgt, "p1")
	arEqual(t, src, "p2", tgt, "p2")
	// --json would mix the summary into the archive on stdout
	arSofa(t, bin, nil, "backup", src.DBURL("p1"), "-", "--json").want(t, exitUsage)
	// stdin can only be the one archive of a restore
	arSofa(t, bin, nil, "restore", "-", "-", tgt.URL).want(t, exitUsage)
}

// arPeakRSS runs sofa to completion and returns its own peak RSS in
// bytes: sofa runs under this test binary as a small wrapper (rssWrap),
// which reads sofa's ru_maxrss when it exits. Neither the test process's
// rusage of its child (Linux keeps, across exec, the high-water mark of
// the memory the child shared with this large test process: Go starts
// children with CLONE_VM) nor sampling /proc/PID/status (a peak in the
// last interval before exit is missed) measures that.
func arPeakRSS(t *testing.T, bin string, args ...string) int64 {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "peak-rss")
	cmd := exec.Command(self, append([]string{bin}, args...)...)
	cmd.Env = append(os.Environ(), rssWrapEnv+"="+out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sofa %s: %v\n%s", args[0], err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	peak, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || peak <= 0 {
		t.Fatalf("peak RSS %q: %v", b, err)
	}
	return peak
}

// TestRestore_Memory runs cases M1 and M2 scaled down. M1: documents with
// large attachments (12 of 2 MiB and one of 12 MiB, for 3,000 of 1 MB and
// 100 of 10 MB) backed up and restored under --max-inflight-bytes 8 MiB:
// peak RSS stays under the budget plus the engine's documented overhead
// (workers × 3 × --write-batch-bytes) plus the archive's (a 4 MiB chunk
// buffer, the largest blob twice: stored and compressed, and the
// decompressed member on restore; the restore's blob cache is a quarter
// of the budget) plus 48 MiB for the runtime. M2: a
// restore of 20,000 small documents (for 1,000,000) under the same budget
// stays flat: its peak RSS is within 12 MiB of a restore of 10,000, and
// under the budget, the engine's overhead, a 4 MiB doc chunk (compressed
// and not) and 48 MiB.
func TestRestore_Memory(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 36 MB")
	}
	bin := sofaBin(t)
	src := couchtest.Start(t)
	ctx := t.Context()
	c := src.Client()
	if err := c.CreateDB(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	sizes := []int{12 << 20}
	for range 12 {
		sizes = append(sizes, 2<<20)
	}
	for i, n := range sizes {
		if _, err := c.PutAttachment(ctx, "m1", fmt.Sprintf("big-%02d", i), "", "blob.bin", "application/octet-stream", arRandom(n)); err != nil {
			t.Fatal(err)
		}
	}
	arCreate(t, src, "m2-small", true, arSmallDocs("s", 10000)...)
	arCreate(t, src, "m2-large", true, arSmallDocs("l", 20000)...)
	dir := t.TempDir()
	const budget, writeBatch, workers = 8 << 20, 2 << 20, 2
	tune := []string{"-q", fmt.Sprint("--max-inflight-bytes=", budget), fmt.Sprint("--write-batch-bytes=", writeBatch), fmt.Sprint("--workers=", workers)}
	bound := int64(budget + workers*3*writeBatch + 4<<20 + 2*12<<20 + 12<<20 + 48<<20)

	m1 := filepath.Join(dir, "m1.sofa")
	peak := arPeakRSS(t, bin, append([]string{"backup", src.DBURL("m1"), m1}, tune...)...)
	t.Logf("M1 backup: peak RSS %.1f MiB (bound %.1f MiB)", float64(peak)/(1<<20), float64(bound)/(1<<20))
	if peak > bound {
		t.Errorf("M1 backup: peak RSS %d > %d", peak, bound)
	}
	tgt := couchtest.Start(t)
	peak = arPeakRSS(t, bin, append([]string{"restore", m1, tgt.URL}, tune...)...)
	t.Logf("M1 restore: peak RSS %.1f MiB", float64(peak)/(1<<20))
	if peak > bound {
		t.Errorf("M1 restore: peak RSS %d > %d", peak, bound)
	}
	arEqual(t, src, "m1", tgt, "m1")

	var peaks []int64
	for _, db := range []string{"m2-small", "m2-large"} {
		path := filepath.Join(dir, db+".sofa")
		arSofa(t, bin, nil, "backup", src.DBURL(db), path, "-q").want(t, exitOK)
		p := arPeakRSS(t, bin, append([]string{"restore", path, tgt.URL}, tune...)...)
		t.Logf("M2 restore of %s: peak RSS %.1f MiB", db, float64(p)/(1<<20))
		peaks = append(peaks, p)
	}
	if grew := peaks[1] - peaks[0]; grew > 12<<20 {
		t.Errorf("M2: restoring twice the documents grew peak RSS by %.1f MiB", float64(grew)/(1<<20))
	}
	if m2bound := int64(budget + workers*3*writeBatch + 2*4<<20 + 48<<20); peaks[1] > m2bound {
		t.Errorf("M2: peak RSS %d > %d", peaks[1], m2bound)
	}
	arEqual(t, src, "m2-large", tgt, "m2-large")
}
