package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
)

// TestCLI_ContinuousServers: `replicate --continuous` of a server copies
// every database, then a write made while it runs arrives on the target
// (waited for with a longpoll on the target's changes feed), the metrics
// endpoint counts it, and SIGINT ends the run with exit 130 and a JSON
// summary marked interrupted.
func TestCLI_ContinuousServers(t *testing.T) {
	bin := sofaBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	a, b := couchtest.Start(t), couchtest.Start(t)
	ca, cb := couchtest.NewClient(a.URL), couchtest.NewClient(b.URL)
	if err := ca.CreateDB(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, a, "c1", 3)
	if a.Kind == couchtest.CouchDB {
		// _db_updates needs it (as after _cluster_setup)
		if err := ca.CreateDB(ctx, "_global_changes"); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(ctx, bin, "replicate", "--continuous", "--json", "--metrics-addr", "127.0.0.1:0",
		"--poll-interval", "200ms", a.URL, b.URL)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	lines := stderrLines(t, cmd)
	var log strings.Builder
	waitLine := func(re *regexp.Regexp) []string { t.Helper(); return waitMatch(t, ctx, lines, &log, re) }
	addr := waitLine(regexp.MustCompile(`metrics on http://([0-9.:]+)/metrics`))[1]
	waitLine(regexp.MustCompile(`initial copy done: 1 database \(1 ok`))

	var info struct {
		UpdateSeq json.RawMessage `json:"update_seq"`
	}
	if err := cb.GetJSON(ctx, "/c1", &info); err != nil {
		t.Fatal(err)
	}
	since := strings.Trim(string(info.UpdateSeq), `"`)
	if _, err := ca.PutDoc(ctx, "c1", "live", map[string]any{"at": time.Now().UnixNano()}); err != nil {
		t.Fatal(err)
	}
	var ch struct {
		Results []struct {
			ID string `json:"id"`
		} `json:"results"`
	}
	// The target's longpoll answers once the write arrives.
	for arrived := false; !arrived; {
		if err := cb.GetJSON(ctx, "/c1/_changes?feed=longpoll&timeout=60000&since="+since, &ch); err != nil {
			t.Fatal(err)
		}
		for _, r := range ch.Results {
			arrived = arrived || r.ID == "live"
		}
		if ctx.Err() != nil {
			t.Fatal("the write never arrived")
		}
	}

	// The copy that wrote it counts it when it ends (after its
	// checkpoint): the metric is read until it does.
	var body []byte
	want := `sofa_db_docs_written_total{db="c1"} 4`
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(string(body), want) {
		select {
		case <-ctx.Done():
			t.Fatalf("metrics lack %q:\n%s", want, body)
		case <-tick.C:
		}
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	for _, m := range []string{"sofa_host_throttled_total{role=\"source\"}", "sofa_lag_seconds_bucket", "sofa_dbs_behind 0"} {
		if !strings.Contains(string(body), m) {
			t.Errorf("metrics lack %s", m)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var tail []string
	for l := range lines {
		tail = append(tail, l)
	}
	// the interrupt's "stopping" line comes before the run's final lines
	stopping, final := -1, -1
	for i, l := range tail {
		if stopping < 0 && strings.Contains(l, "stopping") {
			stopping = i
		}
		if final < 0 && (strings.Contains(l, "stopped after") || strings.Contains(l, "interrupted")) {
			final = i
		}
	}
	if stopping < 0 || final < stopping {
		t.Errorf("lines after SIGINT, want the stopping line before the final ones:\n%s", strings.Join(tail, "\n"))
	}
	if testing.Verbose() {
		t.Log(strings.Join(tail, "\n"))
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit %d, want %d\n%s", code, exitInterrupted, log.String())
	}
	var sum struct {
		Interrupted bool   `json:"interrupted"`
		Mode        string `json:"mode"`
		DocsWritten int64  `json:"docs_written"`
		// as every --json document has them
		Status   string `json:"status"`
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
		// seconds, named as in a one-shot run's document
		Duration *float64 `json:"duration_s"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &sum); err != nil || !sum.Interrupted || sum.DocsWritten != 1 ||
		sum.Status != "interrupted" || sum.ExitCode != exitInterrupted || !strings.HasPrefix(sum.Error, "interrupted") ||
		sum.Duration == nil || *sum.Duration <= 0 {
		t.Errorf("summary %+v (%v):\n%s", sum, err, stdout.String())
	}
}
