package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
)

// Backup archives (issue 5) through the real CLI: `sofa backup`, `sofa
// restore` and `sofa ls` against PouchDB Server. This file holds the
// shared helpers, `sofa ls`, and bad archives; backup_test.go and
// restore_test.go hold the rest.

// arRun is one finished sofa process.
type arRun struct {
	args           []string
	code           int
	stdout, stderr string
}

// arSofa runs the binary to completion (at most 3 minutes) with stdin as
// its standard input (nil: none).
func arSofa(t *testing.T, bin string, stdin io.Reader, args ...string) arRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("sofa %s: %v", strings.Join(args, " "), err)
	}
	return arRun{args: args, code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

func (r arRun) want(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("sofa %s: exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.args[0], r.code, code, arClip(r.stdout), arClip(r.stderr))
	}
}

// summary decodes the --json summary of backup or restore.
func (r arRun) summary(t *testing.T) fleet.Summary {
	t.Helper()
	var s fleet.Summary
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("summary is not JSON (%v):\n%s\nstderr:\n%s", err, arClip(r.stdout), arClip(r.stderr))
	}
	return s
}

// errLine returns the single line sofa printed on stderr for a failure;
// it fails the test when stderr holds a stack trace or panic.
func (r arRun) errLine(t *testing.T) string {
	t.Helper()
	if strings.Contains(r.stderr, "panic:") || strings.Contains(r.stderr, "goroutine ") {
		t.Fatalf("stderr holds a panic:\n%s", r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	return lines[len(lines)-1]
}

func arClip(s string) string {
	if len(s) > 6000 {
		return s[:3000] + "\n...\n" + s[len(s)-3000:]
	}
	return s
}

// arRaw formats a raw JSON document.
func arRaw(format string, args ...any) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(format, args...))
}

// arRandom returns n random bytes.
func arRandom(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// arCreate creates db on srv and writes docs with the given new_edits.
func arCreate(t *testing.T, srv *couchtest.Server, db string, newEdits bool, docs ...json.RawMessage) {
	t.Helper()
	c := srv.Client()
	if err := c.CreateDB(t.Context(), db); err != nil {
		t.Fatalf("create %s: %v", db, err)
	}
	arWrite(t, srv, db, newEdits, docs...)
}

// arRecreate deletes db and creates it empty again, with an
// instance_start_time of its own: CouchDB 3 gives it in seconds, so a
// database recreated within the second it was created in would look like
// the same one; it is recreated again once the clock has passed to the
// next second. (PouchDB Server gives its own start time for every
// database: there the second try changes nothing, and is the last.)
func arRecreate(t *testing.T, srv *couchtest.Server, db string) {
	t.Helper()
	c, ctx := srv.Client(), t.Context()
	start := func() string {
		var info struct {
			Start json.RawMessage `json:"instance_start_time"`
		}
		if err := c.GetJSON(ctx, "/"+db, &info); err != nil {
			t.Fatalf("info %s: %v", db, err)
		}
		return string(info.Start)
	}
	old := start()
	for try := 0; ; try++ {
		if err := c.DeleteDB(ctx, db); err != nil {
			t.Fatalf("delete %s: %v", db, err)
		}
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatalf("create %s: %v", db, err)
		}
		if start() != old || try == 1 {
			return
		}
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	}
}

// arWrite writes docs into db, 500 per request.
func arWrite(t *testing.T, srv *couchtest.Server, db string, newEdits bool, docs ...json.RawMessage) {
	t.Helper()
	for len(docs) > 0 {
		n := min(500, len(docs))
		if _, err := srv.Client().BulkDocs(t.Context(), db, newEdits, docs[:n]...); err != nil {
			t.Fatalf("write %s: %v", db, err)
		}
		docs = docs[n:]
	}
}

// arSmallDocs returns n small new documents prefix00000...
func arSmallDocs(prefix string, n int) []json.RawMessage {
	docs := make([]json.RawMessage, n)
	for i := range docs {
		docs[i] = arRaw(`{"_id":"%s%05d","i":%d,"text":"%s"}`, prefix, i, i, strings.Repeat("z", 48))
	}
	return docs
}

// arEqual compares db on src with db2 on tgt (_security included).
func arEqual(t *testing.T, src *couchtest.Server, db string, tgt *couchtest.Server, db2 string) {
	t.Helper()
	d, err := couchtest.CompareDBs(t.Context(), src.DBURL(db), tgt.DBURL(db2),
		couchtest.CompareOptions{PouchDBRevpos: true, Security: true, RevsLimit: true})
	if err != nil {
		t.Fatalf("compare %s with %s: %v", db, db2, err)
	}
	if !d.Equal() {
		t.Errorf("%s -> %s: %s", db, db2, d)
	}
}

// arDBExists reports whether db exists on srv.
func arDBExists(t *testing.T, srv *couchtest.Server, db string) bool {
	t.Helper()
	st, err := srv.Client().Do(t.Context(), http.MethodGet, "/"+couchtest.EscapeDB(db), nil, nil)
	if st == http.StatusNotFound {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// arDocCount returns doc_count + doc_del_count of db.
func arDocCount(t *testing.T, srv *couchtest.Server, db string) int64 {
	t.Helper()
	var info struct {
		DocCount int64 `json:"doc_count"`
		DelCount int64 `json:"doc_del_count"`
	}
	if err := srv.Client().GetJSON(t.Context(), "/"+couchtest.EscapeDB(db), &info); err != nil {
		t.Fatal(err)
	}
	return info.DocCount + info.DelCount
}

// lsJSON is the output of `sofa ls --json ARCHIVE`.
type lsJSON struct {
	Header    archive.Header      `json:"header"`
	Databases []archive.DBSummary `json:"databases"`
}

func (l lsJSON) db(t *testing.T, name string) archive.DBSummary {
	t.Helper()
	for _, d := range l.Databases {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("archive %s does not list %q", l.Header.ID, name)
	return archive.DBSummary{}
}

func (l lsJSON) names() []string {
	var n []string
	for _, d := range l.Databases {
		n = append(n, d.Name)
	}
	return n
}

// arLs runs `sofa ls --json` on an archive file.
func arLs(t *testing.T, bin, path string) lsJSON {
	t.Helper()
	r := arSofa(t, bin, nil, "ls", "--json", path)
	r.want(t, exitOK)
	var l lsJSON
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
		t.Fatalf("ls --json output is not JSON (%v):\n%s", err, r.stdout)
	}
	return l
}

// recorder is a reverse proxy in front of a server that logs every
// request, in arrival order, as "METHOD escaped-path", and for POST
// _bulk_docs the document ids of the body.
type recorder struct {
	URL string
	mu  sync.Mutex
	log []recorded
}

type recorded struct {
	Method, Path string
	IDs          []string // _bulk_docs document ids
}

func (r recorded) String() string { return r.Method + " " + r.Path }

func startRecorder(t *testing.T, target string) *recorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	rp := httputil.NewSingleHostReverseProxy(u)
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		e := recorded{Method: req.Method, Path: req.URL.EscapedPath()}
		if req.Method == http.MethodPost && strings.HasSuffix(e.Path, "/_bulk_docs") {
			body, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(body))
			var bd struct {
				Docs []struct {
					ID string `json:"_id"`
				} `json:"docs"`
			}
			_ = json.Unmarshal(body, &bd)
			for _, d := range bd.Docs {
				e.IDs = append(e.IDs, d.ID)
			}
		}
		rec.mu.Lock()
		rec.log = append(rec.log, e)
		rec.mu.Unlock()
		rp.ServeHTTP(w, req)
	})
	srv := &http.Server{Handler: h}
	ln, err := newLoopbackListener()
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	rec.URL = "http://" + ln.Addr().String()
	if u.User != nil { // the target's credentials (CouchDB), sent by sofa through the recorder
		rec.URL = "http://" + u.User.String() + "@" + ln.Addr().String()
	}
	return rec
}

func newLoopbackListener() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

func (r *recorder) requests() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.log...)
}

// withCreds puts the userinfo of like (a URL with credentials) on base.
func withCreds(base, like string) string {
	b, _ := url.Parse(base)
	l, _ := url.Parse(like)
	b.User = l.User
	return b.String()
}

// --- sofa ls ---

func TestArchiveCLI_Ls(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	arCreate(t, srv, "alpha", true, arSmallDocs("a", 20)...)
	arCreate(t, srv, "beta", false,
		arRaw(`{"_id":"x","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"v":1}`),
		arRaw(`{"_id":"x","_rev":"2-c","_revisions":{"start":2,"ids":["c","a"]},"v":2}`),
		arRaw(`{"_id":"y","_rev":"1-d","_deleted":true}`),
		arRaw(`{"_id":"z","_rev":"1-e","_attachments":{"f.txt":{"content_type":"text/plain","data":"aGVsbG8="}}}`))
	path := filepath.Join(t.TempDir(), "full.sofa")
	arSofa(t, bin, nil, "backup", srv.URL, path, "-q", "--include", "alpha", "--include", "beta").want(t, exitOK)

	l := arLs(t, bin, path)
	if l.Header.Format != archive.FormatName || l.Header.Version != archive.FormatVersion || l.Header.ID == "" || l.Header.Since != nil {
		t.Errorf("header %+v", l.Header)
	}
	if l.Header.Compression != archive.Zstd {
		t.Errorf("compression %q, want zstd by default", l.Header.Compression)
	}
	if got := strings.Join(l.names(), ","); got != "alpha,beta" {
		t.Fatalf("databases %s, want alpha,beta", got)
	}
	a, b := l.db(t, "alpha"), l.db(t, "beta")
	if a.DocCount != 20 || a.Revisions != 20 || a.Tombstones != 0 || a.Error != "" || len(a.Seq) == 0 {
		t.Errorf("alpha: %+v", a)
	}
	// beta: x has two leaves, y is a tombstone, z has an attachment
	if b.Revisions != 4 || b.Tombstones != 1 || b.Attachments != 1 || b.Blobs != 1 || b.DocCount != 2 || b.DelCount > 1 { // PouchDB has no doc_del_count
		t.Errorf("beta: revisions %d tombstones %d attachments %d blobs %d docs %d deleted %d",
			b.Revisions, b.Tombstones, b.Attachments, b.Blobs, b.DocCount, b.DelCount)
	}

	r := arSofa(t, bin, nil, "ls", path)
	r.want(t, exitOK)
	for _, want := range []string{l.Header.ID, "full", "zstd", "alpha", "beta"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("ls output lacks %q:\n%s", want, r.stdout)
		}
	}

	// ls of a server and of a database URL
	r = arSofa(t, bin, nil, "ls", "--json", srv.URL)
	r.want(t, exitOK)
	if !strings.Contains(r.stdout, `"alpha"`) || !strings.Contains(r.stdout, `"beta"`) {
		t.Errorf("ls server: %s", r.stdout)
	}
	r = arSofa(t, bin, nil, "ls", srv.DBURL("alpha"))
	r.want(t, exitOK)
	if !strings.Contains(r.stdout, "alpha") || !strings.Contains(r.stdout, "20") {
		t.Errorf("ls database: %s", r.stdout)
	}

	// ls of a missing file and of something that is not an archive
	r = arSofa(t, bin, nil, "ls", filepath.Join(t.TempDir(), "nope.sofa"))
	r.want(t, exitFatal)
	if l := r.errLine(t); !strings.Contains(l, "does not exist") {
		t.Errorf("missing file: %q", l)
	}
	junk := filepath.Join(t.TempDir(), "junk.sofa")
	os.WriteFile(junk, []byte("this is not a tar file at all, just text\n"), 0o644)
	r = arSofa(t, bin, nil, "ls", junk)
	if r.code == exitOK {
		t.Errorf("ls of junk succeeded:\n%s", r.stdout)
	}
}

// --- bad archives (issue point 6) ---

// rewriteArchive copies an archive member by member through edit, which
// may change a member's header and stored bytes, or drop it.
func rewriteArchive(t *testing.T, data []byte, edit func(h *tar.Header, body []byte) (bool, []byte)) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		keep, nb := edit(h, body)
		if !keep {
			continue
		}
		h.Size = int64(len(nb))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(nb); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// reseal sets a member's PAX checksums to match its new bytes, as a forger
// (or a careless tool) would, so that only deeper checks can catch it.
func reseal(h *tar.Header, stored, raw []byte) {
	s, rs := sha256.Sum256(stored), sha256.Sum256(raw)
	h.PAXRecords["SOFA.sha256"] = hex.EncodeToString(s[:])
	h.PAXRecords["SOFA.raw_sha256"] = hex.EncodeToString(rs[:])
	h.PAXRecords["SOFA.raw_size"] = strconv.Itoa(len(raw))
}

// memberNames lists an archive's member names in order.
func memberNames(t *testing.T, data []byte) []string {
	t.Helper()
	var names []string
	rewriteArchive(t, data, func(h *tar.Header, body []byte) (bool, []byte) {
		names = append(names, h.Name)
		return true, body
	})
	return names
}

// memberOffset returns where member name's bytes start in a tar stream.
func memberOffset(t *testing.T, data []byte, name string) int64 {
	t.Helper()
	cr := &countReader{r: bytes.NewReader(data)}
	tr := tar.NewReader(cr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("member %s not found: %v", name, err)
		}
		if h.Name == name {
			return cr.n
		}
	}
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestArchiveCLI_BadArchives: every damaged archive is refused by restore
// and ls/verify-style reads with a one-line error naming the member, a
// non-zero exit, and a JSON summary that claims no database restored that
// was not (case C1, scaled: 3,000 docs in several chunks).
func TestArchiveCLI_BadArchives(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	// "first" is small and sorts first; "second" holds the chunks we damage.
	arCreate(t, src, "first", true, arSmallDocs("f", 10)...)
	arCreate(t, src, "second", true, arSmallDocs("s", 3000)...)
	dir := t.TempDir()
	goodPath := filepath.Join(dir, "good.sofa")
	// version 2: each doc chunk a member of its own, to damage one
	arSofa(t, bin, nil, "backup", src.URL, goodPath, "-q", "--include", "first", "--include", "second", "--archive-version", "2").want(t, exitOK)
	good, err := os.ReadFile(goodPath)
	if err != nil {
		t.Fatal(err)
	}
	names := memberNames(t, good)
	var chunk string
	for _, n := range names {
		if strings.HasPrefix(n, "db/second/docs-") {
			chunk = n
			break
		}
	}
	if chunk == "" {
		t.Fatalf("no doc chunk of second in %v", names)
	}

	zb, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	bombFrame := zb.EncodeAll(make([]byte, 8<<20), nil)
	bomb := bytes.Repeat(bombFrame, 256) // 2 GiB of zeros in a few hundred KB

	cases := []struct {
		name   string
		data   func() []byte
		member string // the member the message must name; "" for the archive
		want   string // a word the message must hold
	}{
		{"truncated mid-record", func() []byte {
			off := memberOffset(t, good, chunk)
			return good[:off+100]
		}, chunk, "truncated"},
		{"flipped byte", func() []byte {
			b := bytes.Clone(good)
			b[memberOffset(t, good, chunk)+50] ^= 0x20
			return b
		}, chunk, "checksum"},
		{"unknown format version", func() []byte {
			return rewriteArchive(t, good, func(h *tar.Header, body []byte) (bool, []byte) {
				if h.Name == "header.json" {
					nb := regexp.MustCompile(`"version":\s*\d+`).ReplaceAll(body, []byte(`"version": 7`))
					reseal(h, nb, nb)
					return true, nb
				}
				return true, body
			})
		}, "header.json", "version"},
		{"member name with ../", func() []byte {
			return rewriteArchive(t, good, func(h *tar.Header, body []byte) (bool, []byte) {
				if h.Name == chunk {
					h.Name = "db/second/../../../../tmp/evil.ndjson.zst"
				}
				return true, body
			})
		}, "db/second/../../../../tmp/evil.ndjson.zst", "unsafe"},
		{"decompression bomb", func() []byte {
			return rewriteArchive(t, good, func(h *tar.Header, body []byte) (bool, []byte) {
				if h.Name == chunk {
					reseal(h, bomb, nil)
					h.PAXRecords["SOFA.raw_size"] = "4096"
					return true, bomb
				}
				return true, body
			})
		}, chunk, "too large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.sofa")
			if err := os.WriteFile(path, tc.data(), 0o644); err != nil {
				t.Fatal(err)
			}
			tgt := couchtest.Start(t)
			t0 := time.Now()
			r := arSofa(t, bin, nil, "restore", path, tgt.URL, "--json")
			if r.code == exitOK {
				t.Fatalf("restore of a bad archive exited 0:\n%s\n%s", r.stdout, r.stderr)
			}
			if d := time.Since(t0); d > 30*time.Second {
				t.Errorf("took %v to refuse", d)
			}
			line := r.errLine(t)
			t.Logf("exit %d: %s", r.code, line)
			if tc.member != "" && !strings.Contains(line, strconv.Quote(tc.member)) {
				t.Errorf("message %q does not name member %q", line, tc.member)
			}
			if !strings.Contains(strings.ToLower(line), tc.want) {
				t.Errorf("message %q does not say %q", line, tc.want)
			}
			if strings.Contains(line, tgt.URL) && strings.Contains(line, "@") {
				t.Errorf("message leaks a URL with credentials: %q", line)
			}
			// The JSON summary, when printed, never claims "second" ok.
			if strings.TrimSpace(r.stdout) != "" {
				s := r.summary(t)
				for _, d := range s.DBs {
					if d.Name == "second" && d.Status == fleet.StatusOK {
						t.Errorf("summary claims second restored: %+v", d)
					}
				}
				if s.DBsOK == s.DBsTotal && s.DBsTotal > 0 && tc.member != "header.json" {
					t.Errorf("summary claims every database ok: %+v", s)
				}
			}
			// ls of a version 2 archive reads only its footer and index
			// (from a file or an object store, at offsets): it refuses what
			// damages those (a cut archive has no footer: read in order, it
			// ends early), while damage inside members (a flipped byte, a
			// bomb, a renamed member, a rewritten header) is found by
			// reading them, as restore above and verify here do.
			if tc.name != "truncated mid-record" {
				v := arSofa(t, bin, nil, "verify", path)
				if v.code == exitOK {
					t.Errorf("verify accepted the archive:\n%s", v.stderr)
				} else if l := v.errLine(t); tc.member != "" && !strings.Contains(l, strconv.Quote(tc.member)) {
					t.Errorf("verify message %q does not name %q", l, tc.member)
				}
			}
			if tc.name == "truncated mid-record" {
				ls := arSofa(t, bin, nil, "ls", path)
				if ls.code == exitOK {
					t.Errorf("ls accepted the archive:\n%s", ls.stdout)
				} else if l := ls.errLine(t); tc.member != "" && tc.name != "truncated mid-record" && !strings.Contains(l, strconv.Quote(tc.member)) {
					t.Errorf("ls message %q does not name %q", l, tc.member)
				}
			}
		})
	}
}
