package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// A target server lost in the middle of a whole-server copy (every
// connection reset, for the databases after the fourth) stops the run:
// exit 1 naming the server, the databases copied before it counted ok,
// none started after the lost one, rather than each tried for the whole
// retry budget and the run called finished (exit 3).
func TestCLI_LostTargetStopsRun(t *testing.T) {
	bin := sofaBin(t)
	src, tgt := lostServers(t)
	px := faultproxy.StartT(t, tgt.URL)
	if err := px.SetRules(faultproxy.Rule{Name: "gone", Path: "^/lost[4-7]", Fault: faultproxy.Reset}); err != nil {
		t.Fatal(err)
	}
	r := cliRun(t, bin, "replicate", src.URL, px.URL, "--include", "lost*", "--max-dbs", "1", "--fixed",
		"--retry-time", "1s", "--json", "--progress-interval", "1h")
	r.wantCode(t, exitFatal)
	var sum struct {
		OK         int `json:"dbs_ok"`
		Failed     int `json:"dbs_failed"`
		NotStarted int `json:"dbs_not_started"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("summary: %v\n%s", err, r.stdout)
	}
	if sum.OK != 4 || sum.Failed != 1 || sum.NotStarted != 3 {
		t.Errorf("ok %d, failed %d, not started %d; want 4, 1, 3", sum.OK, sum.Failed, sum.NotStarted)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "stopped") || !strings.Contains(last, strings.TrimPrefix(px.URL, "http://")) {
		t.Errorf("last line %q: want it to say the run stopped and name the target", last)
	}
}

// The same for a restore read in order from stdin: a target lost at the
// fifth database stops the restore (exit 1, the target named), and no
// database after it is tried, rather than each for the whole retry budget
// while the archive is read to its end.
func TestCLI_LostTargetStopsStdinRestore(t *testing.T) {
	bin := sofaBin(t)
	src, tgt := lostServers(t)
	arch := filepath.Join(t.TempDir(), "lost.sofa")
	// One database at a time: the archive holds them in name order.
	cliRun(t, bin, "backup", src.URL, arch, "--include", "lost*", "--max-dbs", "1", "--fixed", "-q").wantCode(t, exitOK)
	px := faultproxy.StartT(t, tgt.URL)
	if err := px.SetRules(faultproxy.Rule{Name: "gone", Path: "^/lost4", Fault: faultproxy.Reset},
		faultproxy.Rule{Name: "after", Path: "^/lost[5-7]", Fault: faultproxy.Reset}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(arch)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := cliRunStdin(t, bin, f, "restore", "-", px.URL, "--retry-time", "1s", "--json", "--progress-interval", "1h")
	r.wantCode(t, exitFatal)
	var sum struct {
		OK     int `json:"dbs_ok"`
		Failed int `json:"dbs_failed"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("summary: %v\n%s", err, r.stdout)
	}
	if sum.OK != 4 || sum.Failed != 1 {
		t.Errorf("ok %d, failed %d; want 4, 1\n%s", sum.OK, sum.Failed, r.stderr)
	}
	if n := px.Rule("after").Matched; n != 0 {
		t.Errorf("%d requests for the databases after the lost one; want none", n)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "stopped") || !strings.Contains(last, strings.TrimPrefix(px.URL, "http://")) {
		t.Errorf("last line %q: want it to say the run stopped and name the target", last)
	}
}

// lostServers starts a source holding databases lost0 to lost7 of 3
// documents each, and an empty target.
func lostServers(t *testing.T) (src, tgt *couchtest.Server) {
	t.Helper()
	src, tgt = couchtest.Start(t), couchtest.Start(t)
	for i := range 8 {
		db := fmt.Sprintf("lost%d", i)
		if err := src.Client().CreateDB(t.Context(), db); err != nil {
			t.Fatal(err)
		}
		cliLoad(t, src, db, 3)
	}
	return src, tgt
}
