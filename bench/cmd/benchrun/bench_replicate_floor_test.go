package main

import (
	"strings"
	"testing"
)

func TestWorkFloorTakesTheCheapestStore(t *testing.T) {
	reads := []record{{Tool: "bound-read-multipart", OK: true, ServerCPUMS: 2400}, {Tool: "bound-read", OK: true, ServerCPUMS: 1700}, {Tool: "bound-read-x", OK: false, ServerCPUMS: 900}}
	recs := map[string]record{
		"sofa":                         {OK: true, ServerCPUMS: 3250},
		"bound-ingest 500/4":           {OK: true, Extra: map[string]any{timedTargetCPU: float64(1690)}}, // as read back from JSON
		"bound-ingest 500/16":          {OK: true, Extra: map[string]any{timedTargetCPU: int64(1510)}},
		"bound-ingest 500/32":          {OK: false, Extra: map[string]any{timedTargetCPU: int64(900)}}, // failed: not a store
		"bound-ingest-multipart 500/4": {OK: true, Extra: map[string]any{timedTargetCPU: int64(2390)}},
		"bound-copy 500/4 x 4 dbs":     {OK: true, Extra: map[string]any{timedTargetCPU: int64(100)}}, // not an ingest bound
		"bound-ingest 1000/4":          {OK: true},                                                    // no pids: not measured
	}
	f := newWorkFloor(reads, recs, "bound-ingest")
	f.cores = 2
	if f.storeCPU != 1510 || f.store != "bound-ingest 500/16" {
		t.Fatalf("store = %d by %q, want 1510 by bound-ingest 500/16", f.storeCPU, f.store)
	}
	if f.read != "bound-read" || f.cpu() != 3210 || f.ms() != 1605 {
		t.Fatalf("cpu, ms = %d, %d; want 3210, 1605", f.cpu(), f.ms())
	}
	if f.beatenBy(3250) || !f.beatenBy(3000) || f.beatenBy(0) {
		t.Fatal("beatenBy: a run's servers' CPU below the floor's, and only that, beats it")
	}
	if d := f.describe("sofa", 3000); !strings.Contains(d, "bounds nothing") || !strings.Contains(d, "floor = 1.60 s") {
		t.Fatalf("describe of a beaten floor: %s", d)
	}
	if got := newWorkFloor(reads[2:], recs, "bound-ingest"); got.cpu() != 0 || got.ms() != 0 {
		t.Fatalf("a failed read leaves the floor unmeasured: %+v", got)
	}
}

func TestFiveXReachWeighsTheWorkFloor(t *testing.T) {
	work := workFloor{readCPU: 1700, storeCPU: 1510, store: "bound-ingest 500/16", cores: 2} // 1,605 ms
	// sofa beat the copy bound; 5x (1,470 ms) is below the floor, whose CPU sofa's servers did not undercut
	if got := fiveXReach(1470, 900, 2170, 1950, 1880, work, 3250); !strings.HasPrefix(got, "out of reach: below the servers' work floor") {
		t.Fatalf("5x below an unbeaten floor: %s", got)
	}
	// the same, but sofa's servers used less than the floor's CPU: it stops nothing
	if got := fiveXReach(1470, 900, 2170, 1950, 1880, work, 3100); !strings.HasPrefix(got, "not stopped by a bound") || !strings.Contains(got, "undercut") {
		t.Fatalf("5x below a beaten floor: %s", got)
	}
	// 5x above the floor
	if got := fiveXReach(1700, 900, 2170, 1950, 1880, work, 3250); !strings.HasPrefix(got, "not stopped by a bound") || !strings.Contains(got, "x the servers' work floor") {
		t.Fatalf("5x above the floor: %s", got)
	}
	// no floor measured: as before
	if got := fiveXReach(1470, 900, 2170, 1950, 1880, workFloor{}, 3250); !strings.HasPrefix(got, "not stopped by a bound") || strings.Contains(got, "floor") {
		t.Fatalf("no floor: %s", got)
	}
	if got := fiveXReach(800, 900, 2170, 1950, 1880, work, 3250); !strings.Contains(got, "ingest bound") {
		t.Fatalf("below the ingest bound: %s", got)
	}
}
