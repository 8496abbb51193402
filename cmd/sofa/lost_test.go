package main

import (
	"encoding/json"
	"fmt"
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
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	for i := range 8 {
		db := fmt.Sprintf("lost%d", i)
		if err := src.Client().CreateDB(t.Context(), db); err != nil {
			t.Fatal(err)
		}
		cliLoad(t, src, db, 3)
	}
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
