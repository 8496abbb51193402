package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
)

// Defects found by a new user on CouchDB 3.5 (nu-report2).

// damagedArchive (returning the source server first) backs up "a" (small), "m" and "z" (several chunks each)
// of a fresh server and flips one byte in the first document chunk of
// whichever of m and z comes first in the archive; it returns the damaged
// archive's path, the member damaged, and the archive's databases a
// restore selects by default (all but _replicator), in order.
func damagedArchive(t *testing.T, bin string) (*couchtest.Server, string, string, []string) {
	t.Helper()
	src := couchtest.Start(t)
	arCreate(t, src, "a", true, arSmallDocs("a", 5)...)
	arCreate(t, src, "m", true, arSmallDocs("m", 3000)...)
	arCreate(t, src, "z", true, arSmallDocs("z", 3000)...)
	dir := t.TempDir()
	goodPath := filepath.Join(dir, "good.sofa")
	// version 2: each doc chunk a member of its own, to damage one
	arSofa(t, bin, nil, "backup", src.URL, goodPath, "-q", "--archive-version", "2").want(t, exitOK)
	good, err := os.ReadFile(goodPath)
	if err != nil {
		t.Fatal(err)
	}
	var chunk string
	var dbs []string
	for _, n := range memberNames(t, good) {
		rest, ok := strings.CutPrefix(n, "db/")
		if !ok {
			continue
		}
		db, _, _ := strings.Cut(rest, "/")
		if db != "_replicator" && (len(dbs) == 0 || dbs[len(dbs)-1] != db) {
			dbs = append(dbs, db)
		}
		if chunk == "" && (strings.HasPrefix(n, "db/m/docs-") || strings.HasPrefix(n, "db/z/docs-")) {
			chunk = n
		}
	}
	if chunk == "" {
		t.Fatal("no document chunk of m or z")
	}
	good[memberOffset(t, good, chunk)+50] ^= 0x20
	bad := filepath.Join(dir, "bad.sofa")
	if err := os.WriteFile(bad, good, 0o644); err != nil {
		t.Fatal(err)
	}
	return src, bad, chunk, dbs
}

// TestNU2_DamagedRestoreListsEveryDB (item 1): a restore meeting a
// damaged member lists every selected database: the one being restored
// failed (the member named, and the empty database it left said). An
// archive read in order (stdin) stops there: the databases after it are
// not restored (and, listed from a file's manifest, "not started"). An
// archive read at offsets (a file) restores every other database, each
// group checked on its own; the exit code still says the archive is
// damaged.
func TestNU2_DamagedRestoreListsEveryDB(t *testing.T) {
	bin := sofaBin(t)
	_, bad, chunk, dbs := damagedArchive(t, bin)
	damaged := strings.Split(chunk, "/")[1]
	check := func(t *testing.T, r arRun, tgt *couchtest.Server, inOrder bool) {
		t.Helper()
		r.want(t, exitFatal)
		s := r.summary(t)
		got := map[string]fleet.DBResult{}
		for _, d := range s.DBs {
			got[d.Name] = d
		}
		after := false
		for _, db := range dbs {
			d, listed := got[db]
			switch {
			case db == damaged:
				after = true
				if d.Status != fleet.StatusFailed || !strings.Contains(d.Error, strconv.Quote(chunk)) {
					t.Errorf("%s: want failed naming %s: %+v", db, chunk, d)
				}
				if n := arDocCount(t, tgt, db); n < 3000 && !strings.Contains(d.Error, "left") {
					t.Errorf("%s holds %d of 3000 documents on the target but its error does not say so: %q", db, n, d.Error)
				}
			case after && inOrder:
				if listed && d.Status != fleet.StatusNotStarted {
					t.Errorf("%s (after the damage, read in order): want not listed or not_started: %+v", db, d)
				}
			default:
				if d.Status != fleet.StatusOK {
					t.Errorf("%s: want ok: %+v", db, d)
				}
			}
		}
	}
	t.Run("file", func(t *testing.T) {
		tgt := couchtest.Start(t)
		r := arSofa(t, bin, nil, "restore", bad, tgt.URL, "--json")
		check(t, r, tgt, false)
		if s := r.summary(t); s.DBsTotal != len(dbs) || s.DBsOK != len(dbs)-1 {
			t.Errorf("summary: %d databases, %d ok; want %d, %d", s.DBsTotal, s.DBsOK, len(dbs), len(dbs)-1)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		f, err := os.Open(bad)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		tgt := couchtest.Start(t)
		check(t, arSofa(t, bin, f, "restore", "-", tgt.URL, "--json"), tgt, true)
	})
}

// TestNU2_BackupOntoDirectory (item 7): an ARCHIVE naming a directory is
// refused before any database is read, with or without --force, with one
// line that does not suggest --force; the directory is left alone.
func TestNU2_BackupOntoDirectory(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "plain", true, arSmallDocs("p", 20)...)
	rec := startRecorder(t, src.URL)
	dir := filepath.Join(t.TempDir(), "somedir")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, force := range []bool{false, true} {
		args := []string{"backup", rec.URL, dir}
		if force {
			args = append(args, "--force")
		}
		r := arSofa(t, bin, nil, args...)
		r.want(t, exitUsage)
		line := r.errLine(t)
		if !strings.Contains(line, "directory") || strings.Contains(line, "use --force") {
			t.Errorf("--force=%v: message %q: want it to say directory, not suggest --force", force, line)
		}
		if strings.Contains(r.stdout+r.stderr, " ok") {
			t.Errorf("--force=%v: a summary was printed:\n%s\n%s", force, r.stdout, r.stderr)
		}
	}
	for _, q := range rec.requests() {
		if strings.Contains(q.Path, "_all_dbs") || strings.Contains(q.Path, "_changes") || strings.Contains(q.Path, "plain") {
			t.Errorf("the source was read before the archive was refused: %s", q)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "keep")); err != nil {
		t.Errorf("the directory was touched: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(dir)); len(ents) != 1 {
		t.Errorf("files left next to the directory: %v", ents)
	}
}

// TestNU2_BackupClosedStdout (item 10): a backup to stdout whose reader
// goes away fails with exit 1 and one line saying so, no summary claiming
// success, never death by SIGPIPE (exit 141). Both an archive smaller
// than the write buffer (the error comes at the final flush) and one larger than the write buffer
// (it comes while databases are written).
func TestNU2_BackupClosedStdout(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	// Both larger than a pipe's buffer, so that the reader goes away
	// before sofa wrote them.
	mid := base64.StdEncoding.EncodeToString(arRandom(300 << 10))
	arCreate(t, src, "mid", true, arRaw(`{"_id":"att","_attachments":{"r.bin":{"content_type":"application/octet-stream","data":%q}}}`, mid))
	big := base64.StdEncoding.EncodeToString(arRandom(3 << 20))
	arCreate(t, src, "big", true, arRaw(`{"_id":"att","_attachments":{"r.bin":{"content_type":"application/octet-stream","data":%q}}}`, big))
	for _, db := range []string{"mid", "big"} {
		t.Run(db, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "backup", src.URL+"/"+db, "-")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(out, make([]byte, 1000)); err != nil {
				t.Fatalf("read the archive's first bytes: %v", err)
			}
			out.Close() // like head -c 1000
			err = cmd.Wait()
			code := cmd.ProcessState.ExitCode()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				t.Fatalf("killed by %v, want exit 1\n%s", ws.Signal(), stderr.String())
			}
			if code != exitFatal {
				t.Fatalf("exit %d (%v), want %d\n%s", code, err, exitFatal, stderr.String())
			}
			var msgs []string
			for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
				if strings.HasPrefix(l, "sofa: ") {
					msgs = append(msgs, l)
				}
			}
			if len(msgs) != 1 || !strings.Contains(msgs[0], "broken pipe") {
				t.Errorf("want one line saying broken pipe, got %q\n%s", msgs, stderr.String())
			}
		})
	}
}

// TestNU2_LsConfig (item 12): ls takes --config like every other verb, and
// the same file as they do: a setting of another verb is left alone, one
// of no verb is refused.
func TestNU2_LsConfig(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "plain", true, arSmallDocs("p", 3)...)
	dir := t.TempDir()
	ar := filepath.Join(dir, "a.sofa")
	arSofa(t, bin, nil, "backup", src.URL+"/plain", ar, "-q").want(t, exitOK)
	cfg := filepath.Join(dir, "c.toml")
	// One file for every verb: workers is a setting of the copying verbs,
	// which ls does not take and leaves alone.
	if err := os.WriteFile(cfg, []byte("json = true\nworkers = 8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{ar, src.URL} {
		r := arSofa(t, bin, nil, "ls", ep, "--config", cfg)
		r.want(t, exitOK)
		if !json.Valid([]byte(r.stdout)) || !strings.Contains(r.stdout, "plain") {
			t.Errorf("ls %s --config (json = true): not JSON listing plain:\n%s", ep, r.stdout)
		}
	}
	if err := os.WriteFile(cfg, []byte("nonsense = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := arSofa(t, bin, nil, "ls", ar, "--config", cfg)
	r.want(t, exitUsage)
	if l := r.errLine(t); !strings.Contains(l, "nonsense") {
		t.Errorf("unknown setting: %q", l)
	}
}

// TestNU2_ChainDeletedDB (item 2): a database deleted at the source
// between two backups of a chain is absent from the last archive; a
// restore of the chain gives the state as of the last archive (the
// database is not restored) and says so in the summary: left out with
// the reason, counted in no status (it was counted ok), exit 0, in
// --json (left_out) and in the lines.
func TestNU2_ChainDeletedDB(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "keep", true, arSmallDocs("k", 5)...)
	arCreate(t, src, "v1", true, arSmallDocs("v", 5)...)
	dir := t.TempDir()
	full, inc2, inc3 := filepath.Join(dir, "full.sofa"), filepath.Join(dir, "inc2.sofa"), filepath.Join(dir, "inc3.sofa")
	arSofa(t, bin, nil, "backup", src.URL, full, "-q").want(t, exitOK)
	arWrite(t, src, "keep", true, arSmallDocs("k2-", 3)...)
	arSofa(t, bin, nil, "backup", src.URL, inc2, "--since", full, "-q").want(t, exitOK)
	if err := src.Client().DeleteDB(t.Context(), "v1"); err != nil {
		t.Fatal(err)
	}
	arSofa(t, bin, nil, "backup", src.URL, inc3, "--since", inc2, "-q").want(t, exitOK)

	tgt := couchtest.Start(t)
	r := arSofa(t, bin, nil, "restore", full, inc2, inc3, tgt.URL, "--json")
	r.want(t, exitOK)
	if arDBExists(t, tgt, "v1") {
		t.Errorf("v1, deleted at the source before the last archive, was restored")
	}
	if n := arDocCount(t, tgt, "keep"); n != 8 {
		t.Errorf("keep: %d documents, want 8", n)
	}
	s := r.summary(t)
	for _, d := range s.DBs {
		if d.Name == "v1" {
			t.Errorf("v1, not restored, is among the databases: %+v", d)
		}
	}
	if s.DBsTotal != len(s.DBs) || s.DBsOK != len(s.DBs) {
		t.Errorf("dbs_total=%d dbs_ok=%d, want %d (keep, _users)", s.DBsTotal, s.DBsOK, len(s.DBs))
	}
	if i := slices.IndexFunc(s.LeftOut, func(l fleet.LeftOut) bool { return l.Name == "v1" }); i < 0 || !strings.Contains(s.LeftOut[i].Reason, "deleted at the source since "+inc2) {
		t.Errorf("left_out does not say v1 was deleted at the source since inc2.sofa: %+v", s.LeftOut)
	}
	r = arSofa(t, bin, nil, "verify", src.URL, tgt.URL)
	r.want(t, exitOK)
	// the lines, v1 and keep under new names on the same target (once it was compared)
	r = arSofa(t, bin, nil, "restore", full, inc2, inc3, tgt.URL, "--include", "keep", "--include", "v1", "--rename", "v1=v1b", "--rename", "keep=keep2")
	r.want(t, exitOK)
	for _, want := range []string{
		"sofa: 1 database in ", ": 1 ok, 0 partial, 0 failed",
		`sofa: database "v1b" left out: deleted at the source since ` + inc2 + " (or left out of the later backups' selection): " + inc3 + ", the last archive of the chain, does not hold it",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, `"v1b": ok`) {
		t.Errorf("v1b, not restored, is said ok:\n%s", r.stderr)
	}
}

// TestNU2_SinceDamagedBase (item 8): an incremental backup checks the
// whole previous archive (every member's checksum) before the source is
// read: a damaged base is refused, naming the member, and no archive is
// written.
func TestNU2_SinceDamagedBase(t *testing.T) {
	bin := sofaBin(t)
	src, bad, chunk, _ := damagedArchive(t, bin)
	out := filepath.Join(t.TempDir(), "inc.sofa")
	r := arSofa(t, bin, nil, "backup", src.URL, out, "--since", bad)
	r.want(t, exitFatal)
	line := r.errLine(t)
	if !strings.Contains(line, strconv.Quote(chunk)) || !strings.Contains(line, "checksum") {
		t.Errorf("message %q does not name the damaged member %s", line, chunk)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("an incremental archive was written on a damaged base")
	}
}

// TestNU2_ProgressInterruptedFinal (item 11): the final progress line of
// an interrupted server backup counts the interrupted databases as such,
// as the summary does, not as done.
func TestNU2_ProgressInterruptedFinal(t *testing.T) {
	bin := sofaBin(t)
	inChanges := make(chan struct{})
	var once sync.Once
	src := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/":
			io.WriteString(w, `{"express-pouchdb":"Welcome!","version":"4.2.0","uuid":"u1"}`)
		case r.URL.Path == "/_all_dbs":
			io.WriteString(w, `["a"]`)
		case r.URL.Path == "/a":
			io.WriteString(w, `{"db_name":"a","doc_count":1,"doc_del_count":0,"update_seq":1,"instance_start_time":"0"}`)
		case strings.HasSuffix(r.URL.Path, "/_changes"):
			once.Do(func() { close(inChanges) })
			<-r.Context().Done()
		default:
			w.WriteHeader(404)
			io.WriteString(w, `{"error":"not_found","reason":"missing"}`)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "backup", src, filepath.Join(t.TempDir(), "b.sofa"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inChanges:
	case <-ctx.Done():
		t.Fatal("the backup never read _changes")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	out := stderr.String()
	if !strings.Contains(out, "1 interrupted") {
		t.Fatalf("summary does not say 1 interrupted:\n%s", out)
	}
	var final string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `msg="progress final"`) {
			final = l
		}
	}
	if !strings.Contains(final, " dbs_done=0 ") || !strings.Contains(final, " dbs_interrupted=1") {
		t.Errorf("final progress line does not count the interrupted database as interrupted: %q", final)
	}
}

// TestNU2_ProgressLineLabels (item 11): a "progress db" line does not
// put the source's document count next to docs_read (revisions) under a
// look-alike name, and bytes_per_s is an integer, never in scientific
// notation.
func TestNU2_ProgressLineLabels(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	docs := arSmallDocs("d", 4000)
	arCreate(t, src, "many", true, docs...)
	r := arSofa(t, bin, nil, "backup", src.URL+"/many", filepath.Join(t.TempDir(), "m.sofa"), "--progress-interval", "10ms", "--batch-size", "50")
	r.want(t, exitOK)
	var dbLines, totalLines, counted int
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.Contains(l, `msg="progress db"`) {
			dbLines++
			if strings.Contains(l, "docs_total=") || strings.Contains(l, "source_doc_count=") && !strings.Contains(l, "source_doc_count=4000") {
				t.Errorf("progress db line: want source_doc_count=4000 (or none while unknown), no docs_total: %q", l)
			}
			if strings.Contains(l, "source_doc_count=4000") {
				counted++
			}
		}
		if strings.Contains(l, "msg=progress ") {
			totalLines++
			if !regexp.MustCompile(` bytes_per_s=\d+( |$)`).MatchString(l) || !regexp.MustCompile(` docs_per_s=[\d.]+ `).MatchString(l) {
				t.Errorf("rates not integers: %q", l)
			}
		}
	}
	if dbLines == 0 || totalLines == 0 || counted == 0 {
		t.Fatalf("no periodic progress lines (%d db, %d total):\n%s", dbLines, totalLines, r.stderr)
	}
}
