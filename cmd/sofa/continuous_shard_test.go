package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestCLI_ContinuousShard: `replicate --continuous --shard 0/2` of a
// server copies the databases of shard 0 only (its log's catch-up line
// counts them; the target lists them alone), then ends on SIGINT with
// exit 130.
func TestCLI_ContinuousShard(t *testing.T) {
	bin := sofaBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	a, b := couchtest.Start(t), couchtest.Start(t)
	var mine []string
	for i := range 6 {
		db := fmt.Sprintf("cs%d", i)
		if err := a.Client().CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		cliLoad(t, a, db, 2)
		if sofa.ShardOf(db, 2) == 0 {
			mine = append(mine, db)
		}
	}
	if len(mine) == 0 || len(mine) == 6 {
		t.Fatalf("shard 0 holds %v of 6: want some", mine)
	}
	cmd := exec.CommandContext(ctx, bin, "replicate", "--continuous", "--shard", "0/2", "--poll-interval", "200ms", a.URL, b.URL)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	done := regexp.MustCompile(`initial copy done: (\d+) databases`)
	var copied int
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if m := done.FindStringSubmatch(sc.Text()); m != nil {
			copied, _ = strconv.Atoi(m[1])
			break
		}
	}
	if copied != len(mine) {
		t.Errorf("catch-up copied %d databases, want shard 0's %d (%v):\n%s", copied, len(mine), mine, log.String())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit %d, want %d\n%s", code, exitInterrupted, log.String())
	}
	var listed []string
	if err := b.Client().GetJSON(ctx, "/_all_dbs", &listed); err != nil {
		t.Fatal(err)
	}
	listed = slices.DeleteFunc(listed, func(db string) bool { return strings.HasPrefix(db, "_") })
	slices.Sort(listed) // PouchDB Server lists in creation order
	if !slices.Equal(listed, mine) {
		t.Errorf("target lists %v, want shard 0's %v", listed, mine)
	}
}
