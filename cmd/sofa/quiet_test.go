package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// TestReplicate_QuietListsFailures: -q prints nothing but errors, and a
// revision not copied is one: under -q each is still listed (id, rev,
// reason) before the closing line that refers to the list, and nothing
// else is printed.
func TestReplicate_QuietListsFailures(t *testing.T) {
	bin := sofaBin(t)
	check := func(t *testing.T, r cliResult, ids ...string) {
		t.Helper()
		r.wantCode(t, exitPartial)
		for _, id := range ids {
			if !strings.Contains(r.stderr, `sofa: not copied: id="`+id+`" rev=1-`) {
				t.Errorf("-q does not list %s:\n%s", id, r.stderr)
			}
		}
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if len(lines) != len(ids)+1 || !strings.Contains(lines[len(lines)-1], "were not copied (listed above)") {
			t.Errorf("-q printed more or less than the failures and the closing line:\n%s", r.stderr)
		}
	}
	t.Run("rejected", func(t *testing.T) {
		srv := couchtest.Start(t)
		if err := srv.Client().CreateDB(t.Context(), "src"); err != nil {
			t.Fatal(err)
		}
		cliLoad(t, srv, "src", 50)
		px := faultproxy.StartT(t, srv.URL)
		if err := px.SetRules(faultproxy.Rule{Fault: faultproxy.RejectDocs, DocIDs: []string{"doc00007", "doc00023"}, Reason: "only admins may write"}); err != nil {
			t.Fatal(err)
		}
		r := cliRun(t, bin, "replicate", srv.URL+"/src", px.URL+"/tgt", "--create-target", "-q")
		check(t, r, "doc00007", "doc00023")
		if !strings.Contains(r.stderr, "forbidden: only admins may write") {
			t.Errorf("-q does not give the reason:\n%s", r.stderr)
		}
	})
	t.Run("request too large", func(t *testing.T) {
		couchtest.RequireKind(t, couchtest.CouchDB, "chttpd/max_http_request_size is a CouchDB setting")
		src := couchtest.Start(t)
		tgt := couchtest.StartWith(t, couchtest.Options{Config: map[string]string{"chttpd/max_http_request_size": "65536"}})
		if err := src.Client().CreateDB(t.Context(), "src"); err != nil {
			t.Fatal(err)
		}
		cliLoad(t, src, "src", 5)
		big := json.RawMessage(fmt.Sprintf(`{"_id":"big","text":%q}`, strings.Repeat("x", 100<<10)))
		if _, err := src.Client().BulkDocs(t.Context(), "src", true, big); err != nil {
			t.Fatal(err)
		}
		check(t, cliRun(t, bin, "replicate", src.URL+"/src", tgt.URL+"/tgt", "--create-target", "-q"), "big")
	})
}

// TestServers_QuietListsFailures: a whole-server copy under -q lists the
// database that was not copied completely and its revisions not copied
// (errors), and nothing about the databases that were.
func TestServers_QuietListsFailures(t *testing.T) {
	bin := sofaBin(t)
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	for _, db := range []string{"fine", "hurt"} {
		if err := src.Client().CreateDB(t.Context(), db); err != nil {
			t.Fatal(err)
		}
		cliLoad(t, src, db, 20)
	}
	px := faultproxy.StartT(t, tgt.URL)
	if err := px.SetRules(faultproxy.Rule{Fault: faultproxy.RejectDocs, Path: "^/hurt/", DocIDs: []string{"doc00003"}, Reason: "only admins may write"}); err != nil {
		t.Fatal(err)
	}
	r := cliRun(t, bin, "replicate", src.URL, px.URL, "--include", "fine", "--include", "hurt", "-q")
	r.wantCode(t, exitPartial)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) < 3 || !strings.Contains(lines[0], `database "hurt": partial`) ||
		!strings.Contains(lines[1], `not copied: id="doc00003" rev=1-`) || !strings.Contains(lines[len(lines)-1], "1 of 2 databases were not copied completely (listed above)") ||
		strings.Contains(r.stderr, `"fine"`) || strings.Contains(r.stderr, "databases in") {
		t.Errorf("-q printed other than the partial database, its revision (and its warnings) and the closing line:\n%s", r.stderr)
	}
}
