package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// memberServer is a CouchDB whose user alice (password alice-pw) may
// list every database (admin_only_all_dbs off), read "open" (3
// documents) as a member, and not "locked" (2 documents, bob's).
func memberServer(t *testing.T) *couchtest.Server {
	t.Helper()
	srv := couchtest.Start(t)
	ctx := t.Context()
	c := srv.Client()
	if err := c.PutJSON(ctx, "/_node/_local/_config/chttpd/admin_only_all_dbs", "false", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateUser(ctx, "alice", "alice-pw"); err != nil {
		t.Fatal(err)
	}
	arCreate(t, srv, "open", true, arSmallDocs("o", 3)...)
	arCreate(t, srv, "locked", true, arSmallDocs("l", 2)...)
	for db, member := range map[string]string{"open": "alice", "locked": "bob"} {
		if err := c.PutSecurity(ctx, db, couchtest.Security{Members: couchtest.Group{Names: []string{member}, Roles: []string{}}}); err != nil {
			t.Fatal(err)
		}
	}
	return srv
}

// TestLs_ServerSomeDatabasesUnreadable: a member-only account lists a
// server (admin_only_all_dbs off) where one database locks it out: the
// readable ones are listed with their counts, the other marked "not
// read", exit 3; it was no row at all and exit 1.
func TestLs_ServerSomeDatabasesUnreadable(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "_security members and admin_only_all_dbs are CouchDB's")
	bin := sofaBin(t)
	srv := memberServer(t)
	url := srv.UserURL("alice", "alice-pw")
	r := cliRun(t, bin, "ls", url)
	r.wantCode(t, exitPartial)
	if !strings.Contains(r.stdout, "open") || !strings.Contains(r.stdout, "locked") || !strings.Contains(r.stdout, "not read") || strings.Contains(r.stdout+r.stderr, "alice-pw") {
		t.Errorf("ls as a member: want open listed and locked not read, no password:\n%s\n%s", r.stdout, r.stderr)
	}
	r = cliRun(t, bin, "ls", url, "--json")
	r.wantCode(t, exitPartial)
	var rows []struct {
		Name     string `json:"name"`
		DocCount int64  `json:"doc_count"`
		Error    string `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("ls --json: %v\n%s", err, r.stdout)
	}
	got := map[string]string{}
	for _, row := range rows {
		got[row.Name] = row.Error
		if row.Name == "open" && row.DocCount != 3 {
			t.Errorf("open: doc_count %d, want 3", row.DocCount)
		}
	}
	if e, ok := got["open"]; !ok || e != "" {
		t.Errorf("open: %q, want listed without error (rows %+v)", e, rows)
	}
	if !strings.Contains(got["locked"], "forbidden") && !strings.Contains(got["locked"], "401") {
		t.Errorf("locked: error %q, want it refused (rows %+v)", got["locked"], rows)
	}
}

// TestReplicate_UnreadableSourceLeavesNoTarget: a whole-server copy by
// a member-only account fails the database it may not read and leaves
// no empty database of that name on the target (the target database was
// created before the source's _revs_limit was refused).
func TestReplicate_UnreadableSourceLeavesNoTarget(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "_security members and admin_only_all_dbs are CouchDB's")
	bin := sofaBin(t)
	src, tgt := memberServer(t), couchtest.Start(t)
	ctx := t.Context()
	r := cliRun(t, bin, "replicate", src.UserURL("alice", "alice-pw"), tgt.URL, "--include", "open", "--include", "locked")
	r.wantCode(t, exitPartial)
	var info map[string]any
	if code, _ := tgt.Client().Do(ctx, "GET", "/locked", nil, &info); code != 404 {
		t.Errorf("the target holds a database locked (GET: %d) that nothing was copied into:\n%s", code, r.stderr)
	}
	arEqual(t, src, "open", tgt, "open")
}

// TestJSON_ServerRunHasStatus: a whole-server run's --json document has
// a status, as a one-database run's and every failure's do ("ok" here;
// it had none unless the run stopped on an error).
func TestJSON_ServerRunHasStatus(t *testing.T) {
	bin := sofaBin(t)
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	arCreate(t, src, "one", true, arSmallDocs("o", 2)...)
	r := cliRun(t, bin, "replicate", src.URL, tgt.URL, "--include", "one", "--json")
	r.wantCode(t, exitOK)
	var doc struct {
		Status   string `json:"status"`
		ExitCode *int   `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Status != "ok" || doc.ExitCode == nil || *doc.ExitCode != exitOK {
		t.Errorf("--json: status %q, exit_code %v (%v), want ok and 0:\n%s", doc.Status, doc.ExitCode, err, r.stdout)
	}
}

// A table's seq is cut (found by a tester: CouchDB's seqs of 100 bytes
// and more wrapped every row of ls); --json gives it whole.
func TestLs_SeqCutInTable(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "CouchDB's seqs are long; PouchDB Server's are numbers")
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	arCreate(t, srv, "one", true, arSmallDocs("o", 2)...)
	r := cliRun(t, bin, "ls", srv.URL)
	r.wantCode(t, exitOK)
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if len(l) > 100 {
			t.Errorf("a line of %d bytes:\n%s", len(l), r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "...") {
		t.Errorf("no seq cut:\n%s", r.stdout)
	}
	r = cliRun(t, bin, "ls", srv.URL, "--json")
	var rows []struct {
		UpdateSeq string `json:"update_seq"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) == 0 || len(rows[0].UpdateSeq) <= maxSeqShown {
		t.Errorf("ls --json: %+v (%v), want whole seqs", rows, err)
	}
}

// verify takes -v and --debug as the other verbs do (found by a
// tester); under -v a retried request is logged.
func TestVerify_VerboseLogsRetries(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	arCreate(t, srv, "one", true, arSmallDocs("o", 2)...)
	p := faultproxy.StartT(t, srv.URL)
	if err := p.SetRules(faultproxy.Rule{Name: "503", Method: "GET", Path: `^/one$`, Fault: faultproxy.Status, Status: 503, Times: 1}); err != nil {
		t.Fatal(err)
	}
	r := cliRun(t, bin, "verify", p.URL+"/one", srv.URL+"/one", "-v")
	r.wantCode(t, exitOK)
	if p.Rule("503").Fired != 1 || !strings.Contains(r.stderr, "retry") {
		t.Errorf("verify -v: the 503 fired %d times; stderr does not log its retry:\n%s", p.Rule("503").Fired, r.stderr)
	}
	r = cliRun(t, bin, "verify", srv.URL+"/one", srv.URL+"/one", "--debug")
	if r.code == exitUsage {
		t.Errorf("verify --debug refused:\n%s", r.stderr)
	}
}
