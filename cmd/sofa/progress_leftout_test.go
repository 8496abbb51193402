package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// TestCLI_ProgressFinalLeftOut: a whole-server replicate or backup whose
// database "gone" is deleted at the source after the databases were
// listed (its info request held until then) leaves it out, and its
// "progress final" line counts as the summary after it does: 1 database,
// not 2 (found by a reviewer: dbs_total against "N databases").
func TestCLI_ProgressFinalLeftOut(t *testing.T) {
	bin := sofaBin(t)
	for _, verb := range []string{"replicate", "backup"} {
		t.Run(verb, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			src := couchtest.Start(t)
			for _, db := range []string{"keep", "gone"} {
				if err := src.Client().CreateDB(ctx, db); err != nil {
					t.Fatal(err)
				}
				cliLoad(t, src, db, 3)
			}
			target := filepath.Join(t.TempDir(), "b.sofa")
			if verb == "replicate" {
				target = couchtest.Start(t).URL
			}
			// The source's info of gone (GET /gone, or the batch of
			// POST /_dbs_info that asks for it) waits until gone is
			// deleted.
			px := faultproxy.StartT(t, src.URL)
			hold := faultproxy.Rule{Name: "hold", Path: `^/(_dbs_info|gone)$`, Times: 1, Delay: 3 * time.Second, Fault: faultproxy.Forward}
			if err := px.SetRules(hold); err != nil {
				t.Fatal(err)
			}
			r := startBg(t, ctx, bin, verb, px.URL, target, "--include", "keep", "--include", "gone", "--progress-interval", "100ms")
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for px.Rule(hold.Name).Matched == 0 {
				select {
				case <-ctx.Done():
					t.Fatal("gone's info was never asked for")
				case <-tick.C:
				}
			}
			if err := src.Client().DeleteDB(ctx, "gone"); err != nil {
				t.Fatal(err)
			}
			for l := range r.lines {
				r.log.WriteString(l + "\n")
			}
			_ = r.cmd.Wait()
			out := r.log.String()
			if code := r.cmd.ProcessState.ExitCode(); code != exitOK {
				t.Fatalf("exit %d, want 0:\n%s", code, out)
			}
			if !strings.Contains(out, `database "gone" left out: deleted at the source during the run`) ||
				!strings.Contains(out, "sofa: 1 database in ") {
				t.Fatalf("want gone left out, 1 database in the summary:\n%s", out)
			}
			final := regexp.MustCompile(`msg="progress final" dbs_done=(\d+) dbs_total=(\d+) dbs_failed=0`).FindStringSubmatch(out)
			if final == nil || final[1] != "1" || final[2] != "1" {
				t.Errorf("progress final %q, want dbs_done=1 dbs_total=1 as the summary:\n%s", final, out)
			}
		})
	}
}
