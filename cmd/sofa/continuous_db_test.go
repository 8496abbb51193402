package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
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

// `replicate --continuous` copies, says it has caught up, copies the
// writes made while it runs and a changed `_security`, and on SIGTERM writes its final checkpoint
// and exits 130; a rerun resumes from that checkpoint (nothing to copy).
func TestCLI_ContinuousOneDatabase(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	c := srv.Client()
	for _, db := range []string{"src", "tgt"} {
		if err := c.CreateDB(t.Context(), db); err != nil {
			t.Fatal(err)
		}
	}
	cliLoad(t, srv, "src", 50)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "replicate", "--continuous", "--flush-interval", "50ms",
		"--copy-security", "--security-interval", "100ms",
		"--metrics-addr", "127.0.0.1:0", srv.AdminURL()+"/src", srv.AdminURL()+"/tgt")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	var all strings.Builder
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var metricsAddr string
	addrRE := regexp.MustCompile(`metrics on http://([0-9.:]+)/metrics`)
	waitLine := func(what string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("sofa ended before saying %q:\n%s", what, all.String())
				}
				all.WriteString(l + "\n")
				if m := addrRE.FindStringSubmatch(l); m != nil {
					metricsAddr = m[1]
				}
				if strings.Contains(l, what) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("sofa never said %q:\n%s", what, all.String())
			}
		}
	}
	waitLine("src: caught up")
	// /status says the initial catch-up is done.
	if metricsAddr == "" {
		t.Fatalf("sofa did not say where its metrics are:\n%s", all.String())
	}
	var st struct {
		Done bool `json:"initial_catch_up_done"`
	}
	if resp, err := http.Get("http://" + metricsAddr + "/status"); err != nil {
		t.Fatal(err)
	} else {
		err := json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || !st.Done {
			t.Errorf("/status after caught up: initial_catch_up_done %v (%v), want true", st.Done, err)
		}
	}
	var docs []json.RawMessage
	for i := range 30 {
		docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"live%02d"}`, i)))
	}
	if _, err := c.BulkDocs(t.Context(), "src", true, docs...); err != nil {
		t.Fatal(err)
	}
	for docCount(t, srv, "tgt") != 80 {
		select {
		case <-ctx.Done():
			t.Fatalf("the writes made while following never reached the target:\n%s", all.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	// A _security changed at the source while following reaches the
	// target within --security-interval.
	sec := `{"admins":{"names":[],"roles":[]},"members":{"names":["alice"],"roles":[]}}`
	if _, err := c.Do(t.Context(), "PUT", "/src/_security", []byte(sec), nil); err != nil {
		t.Fatal(err)
	}
	waitLine("src: _security changed at the source: written to the target")
	var got struct {
		Members struct {
			Names []string `json:"names"`
		} `json:"members"`
	}
	if err := c.GetJSON(t.Context(), "/tgt/_security", &got); err != nil || len(got.Members.Names) != 1 || got.Members.Names[0] != "alice" {
		t.Errorf("target _security %+v (%v), want the source's", got, err)
	}
	// --metrics-addr serves the database's counters, fed by the engine's
	// Observer: all 80 documents written, and the lag histogram filled.
	if metricsAddr == "" {
		t.Fatalf("sofa did not say where its metrics are:\n%s", all.String())
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`sofa_db_docs_written_total{db="src"} 80`, "sofa_lag_seconds_count"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		all.WriteString(l + "\n")
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit %d, want %d\n%s", code, exitInterrupted, all.String())
	}
	if !strings.Contains(all.String(), "interrupted: checkpoints written") {
		t.Errorf("stderr does not say the checkpoint was written:\n%s", all.String())
	}
	again := cliRun(t, bin, "replicate", "--json", srv.AdminURL()+"/src", srv.AdminURL()+"/tgt")
	again.wantCode(t, exitOK)
	if d := again.result(t); d.Stats.ChangesRead != 0 {
		t.Errorf("rerun read %d changes, want 0 (the final checkpoint covers them)\n%s", d.Stats.ChangesRead, again.stdout)
	}
}
