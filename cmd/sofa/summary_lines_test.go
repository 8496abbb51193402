package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa/fleet"
)

// TestFleetSummary_NotStartedNotListed: an interrupted run's databases
// that never started are counted in the summary line, not listed one by
// one (1,874 lines after an interrupt of a 3,000-database run); failed
// and interrupted ones are still listed, and so are the run's warnings.
func TestFleetSummary_NotStartedNotListed(t *testing.T) {
	s := &fleet.Summary{DBsTotal: 5, DBsOK: 1, DBsFailed: 1, DBsInterrupted: 1, DBsNotStarted: 2, Warnings: []string{"a run warning"},
		DBs: []fleet.DBResult{
			{Name: "ok", Status: fleet.StatusOK},
			{Name: "bad", Status: fleet.StatusFailed, Error: "boom"},
			{Name: "cut", Status: fleet.StatusInterrupted, Error: "context canceled"},
			{Name: "later1", Status: fleet.StatusNotStarted},
			{Name: "later2", Status: fleet.StatusNotStarted},
		}}
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	printFleetSummary(f, s, false)
	f.Close()
	b, _ := os.ReadFile(f.Name())
	out := string(b)
	if strings.Contains(out, "later") {
		t.Errorf("databases not started are listed:\n%s", out)
	}
	for _, want := range []string{`"bad": failed: boom`, `"cut": interrupted`, "2 not started", "warning: a run warning"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}
