package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// jsonDocs decodes stdout as a stream of JSON documents.
func jsonDocs(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("stdout is not JSON documents (%v):\n%s", err, stdout)
		}
		docs = append(docs, d)
	}
}

// TestJSON_FatalPrintsOneDocument: with --json a run that stops before
// its verb printed anything (wrong credentials, a missing archive, a bad
// flag) still prints exactly one JSON document on stdout, with the exit
// code and the line printed on stderr, and no password; a run that
// printed its own document prints nothing more.
func TestJSON_FatalPrintsOneDocument(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.StartWith(t, couchtest.Options{AdminUser: "admin", AdminPassword: "right-pw"})
	arCreate(t, srv, "app", true, arSmallDocs("x", 2)...)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.sofa")
	cliRun(t, bin, "backup", srv.AdminURL(), good, "-q").wantCode(t, exitOK)
	// cut short inside its footer: restored in order up to the damage,
	// which stops the run with a summary
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.sofa")
	if err := os.WriteFile(cut, raw[:len(raw)-300], 0o644); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		env    []string
		args   []string
		code   int
		status string
		says   string
	}{
		{"wrong password", nil, []string{"backup", srv.UserURL("admin", "wrong-pw"), filepath.Join(dir, "x.sofa"), "--json"}, exitFatal, "failed", "authentication failed"},
		{"missing archive", nil, []string{"restore", filepath.Join(dir, "none.sofa"), srv.AdminURL(), "--json"}, exitFatal, "failed", "does not exist"},
		{"unknown flag", nil, []string{"restore", good, srv.AdminURL(), "--json", "--bogus"}, exitUsage, "usage", "unknown flag: --bogus"},
		{"damaged archive after a summary", nil, []string{"restore", cut, srv.AdminURL() + "/copy", "--include", "app", "--json"}, exitFatal, "failed", "truncated archive"},
		{"backup --no-checkpoints", nil, []string{"backup", srv.AdminURL(), filepath.Join(dir, "nc.sofa"), "--no-checkpoints", "--json"}, exitUsage, "usage", "kept in the archive"},
		{"--no-checkpoints --checkpoints both", nil, []string{"replicate", srv.AdminURL() + "/app", srv.AdminURL() + "/app2", "--no-checkpoints", "--checkpoints", "both", "--json"}, exitUsage, "usage", "give one of them"},
		{"--metrics-addr without --continuous", nil, []string{"replicate", srv.AdminURL() + "/app", srv.AdminURL() + "/app2", "--metrics-addr", "127.0.0.1:0", "--json"}, exitUsage, "usage", "--metrics-addr applies to a continuous run only"},
		{"from the environment", []string{"SOFA_JSON=true"}, []string{"restore", filepath.Join(dir, "none.sofa"), srv.AdminURL()}, exitFatal, "failed", "does not exist"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, kv := range tc.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			r := cliRun(t, bin, tc.args...)
			r.wantCode(t, tc.code)
			docs := jsonDocs(t, r.stdout)
			if len(docs) != 1 {
				t.Fatalf("%d JSON documents on stdout, want 1:\n%s", len(docs), r.stdout)
			}
			d := docs[0]
			if d["status"] != tc.status || d["exit_code"] != float64(tc.code) || !strings.Contains(d["error"].(string), tc.says) {
				t.Errorf("document %v, want status %q, exit_code %d, an error saying %q", d, tc.status, tc.code, tc.says)
			}
			if line := strings.TrimSpace(r.stderr); !strings.HasSuffix(line, d["error"].(string)) {
				t.Errorf("error %q is not the line on stderr %q", d["error"], line)
			}
			if strings.Contains(r.stdout+r.stderr, "right-pw") || strings.Contains(r.stdout+r.stderr, "wrong-pw") {
				t.Errorf("a password is in the output:\n%s\n%s", r.stdout, r.stderr)
			}
		})
	}

	t.Run("own document only", func(t *testing.T) {
		r := cliRun(t, bin, "ls", good, "--json")
		r.wantCode(t, exitOK)
		if docs := jsonDocs(t, r.stdout); len(docs) != 1 || docs[0]["exit_code"] != nil {
			t.Fatalf("ls --json printed %d documents, want its own only:\n%s", len(docs), r.stdout)
		}
		// verify ARCHIVE --json: the report's keys are lower case, as
		// every other document's.
		r = cliRun(t, bin, "verify", good, "--json")
		r.wantCode(t, exitOK)
		if docs := jsonDocs(t, r.stdout); len(docs) != 1 || docs[0]["databases"] == nil || docs[0]["header"] == nil || docs[0]["revisions"] == nil {
			t.Fatalf("verify ARCHIVE --json printed %d documents, want one with header, databases and revisions:\n%s", len(docs), r.stdout)
		}
		// A comparison that finds a difference prints its own document
		// (exit 4), not a second one.
		arCreate(t, srv, "other", true, arSmallDocs("y", 1)...)
		r = cliRun(t, bin, "verify", srv.AdminURL()+"/app", srv.AdminURL()+"/other", "--json")
		r.wantCode(t, exitDifferent)
		if docs := jsonDocs(t, r.stdout); len(docs) != 1 || docs[0]["exit_code"] != nil {
			t.Fatalf("verify --json of two different databases printed %d documents, want its own only:\n%s", len(docs), r.stdout)
		}
		// ... and stderr points at the document, not at a list it lacks.
		if strings.Contains(r.stderr, "listed above") || !strings.Contains(r.stderr, "listed in the JSON document on stdout") {
			t.Errorf("verify --json stderr: %q", r.stderr)
		}
	})
}

// TestJSON_ReplicateResultExitCode: a one-database copy's own document,
// and a many-database run's summary, carry the exit code too (a copy that stops on an error prints it as
// well: the same field), for a copy that finished (0) and one that left
// revisions out (3).
func TestJSON_ReplicateResultExitCode(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	arCreate(t, srv, "app", true, append(arSmallDocs("x", 3), arRaw(`{"_id":"bad","bad":true}`))...)
	arCreate(t, srv, "strict", true, arRaw(`{"_id":"_design/v","validate_doc_update":"function(d){ if (d.bad) throw({forbidden: 'bad'}); }"}`))
	for _, tc := range []struct {
		target string
		code   int
		status string
	}{
		{srv.AdminURL() + "/copy", exitOK, "ok"},
		{srv.AdminURL() + "/strict", exitPartial, "partial"},
	} {
		r := cliRun(t, bin, "replicate", srv.AdminURL()+"/app", tc.target, "--create-target", "--json")
		r.wantCode(t, tc.code)
		docs := jsonDocs(t, r.stdout)
		if len(docs) != 1 || docs[0]["status"] != tc.status || docs[0]["exit_code"] != float64(tc.code) {
			t.Errorf("replicate into %s --json: %v, want one document with status %s and exit_code %d", tc.target, docs, tc.status, tc.code)
		}
	}
	// A many-database run's summary too: a backup of the server that is
	// complete (0), a copy of it that leaves a revision out (3).
	r := cliRun(t, bin, "backup", srv.AdminURL(), filepath.Join(t.TempDir(), "all.sofa"), "--include", "app", "--json")
	r.wantCode(t, exitOK)
	if docs := jsonDocs(t, r.stdout); len(docs) != 1 || docs[0]["exit_code"] != float64(exitOK) || docs[0]["dbs_total"] != float64(1) {
		t.Errorf("backup SERVER --json: %v, want one summary with dbs_total 1 and exit_code 0", docs)
	}
	other := couchtest.StartKind(t, srv.Kind)
	arCreate(t, other, "app", true, arRaw(`{"_id":"_design/v","validate_doc_update":"function(d){ if (d.bad) throw({forbidden: 'bad'}); }"}`))
	r = cliRun(t, bin, "replicate", srv.AdminURL(), other.AdminURL(), "--include", "app", "--reuse-existing", "--json")
	r.wantCode(t, exitPartial)
	if docs := jsonDocs(t, r.stdout); len(docs) != 1 || docs[0]["exit_code"] != float64(exitPartial) {
		t.Errorf("replicate SERVER --json, a revision refused: %v, want one summary with exit_code 3", docs)
	}
}
