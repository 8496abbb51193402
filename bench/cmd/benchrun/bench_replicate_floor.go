package main

import (
	"fmt"
	"runtime"
	"strings"
)

// workFloor is the servers' work floor of a whole-server copy, all in
// CPU ms: the source's CPU for the cheapest measured read of every leaf
// revision (the read bounds: the plain feed and `_bulk_get` with revs and
// attachments, as JSON or multipart) plus the target's CPU for the cheapest measured store of
// them (the timed parts of the ingest bounds: pre-built `_bulk_docs`
// with new_edits=false, or multipart PUTs). Both servers share the
// machine's cores, so no copy that reads and stores those revisions ends
// sooner than their sum spread over the cores, unless a cheaper way of
// reading or storing exists than those measured: a tool whose servers
// used less CPU in the same run shows one (beatenBy).
type workFloor struct {
	readCPU, storeCPU int64
	read, store       string // the read and ingest bounds that cost least
	cores             int
}

// timedTargetCPU is the Extra key of an ingest bound's record holding
// the target's CPU ms during its timed part (bench/bound-server.js --pids).
const timedTargetCPU = "timed_target_cpu_ms"

// newWorkFloor reads the floor from a run's records: the read the
// lowest server CPU among the OK reads (read bounds, run against the
// source alone), the store the lowest timed target CPU among the OK
// records whose tool starts with ingestPrefix. Zero parts where not
// measured.
func newWorkFloor(reads []record, recs map[string]record, ingestPrefix string) workFloor {
	f := workFloor{cores: runtime.NumCPU()}
	for _, r := range reads {
		if r.OK && r.ServerCPUMS > 0 && (f.readCPU == 0 || r.ServerCPUMS < f.readCPU) {
			f.readCPU, f.read = r.ServerCPUMS, r.Tool
		}
	}
	for name, r := range recs {
		if !r.OK || !strings.HasPrefix(name, ingestPrefix) {
			continue
		}
		if c := extraInt(r, timedTargetCPU); c > 0 && (f.storeCPU == 0 || c < f.storeCPU || c == f.storeCPU && name < f.store) {
			f.storeCPU, f.store = c, name
		}
	}
	return f
}

// cpu is the floor's CPU ms (0 when a part is missing).
func (f workFloor) cpu() int64 {
	if f.readCPU <= 0 || f.storeCPU <= 0 {
		return 0
	}
	return f.readCPU + f.storeCPU
}

// ms is the floor's time on the cores, in ms (0 when not measured).
func (f workFloor) ms() int64 {
	if f.cores <= 0 {
		return 0
	}
	return f.cpu() / int64(f.cores)
}

// beatenBy says whether a run whose servers used serverCPU ms shows a
// way cheaper than the floor's: the floor then bounds nothing.
func (f workFloor) beatenBy(serverCPU int64) bool {
	return serverCPU > 0 && serverCPU < f.cpu()
}

// describe is the floor's note for a run whose tool (name) used
// serverCPU ms of the servers' CPU.
func (f workFloor) describe(name string, serverCPU int64) string {
	if f.cpu() == 0 {
		return "servers' work floor: not measured (it needs a read bound and an ingest bound with the servers' process ids)"
	}
	s := fmt.Sprintf("servers' work floor = %s s: the source's CPU for the cheapest read (%s, %s CPU-s) + the target's for the cheapest store (%s, %s CPU-s in its timed part), on the %d cores both servers share",
		secs(f.ms()), f.read, secs(f.readCPU), f.store, secs(f.storeCPU), f.cores)
	if serverCPU <= 0 {
		return s
	}
	s += fmt.Sprintf("; %s's servers used %s CPU-s (%s x the floor's)", name, secs(serverCPU), ratio(serverCPU, f.cpu()))
	if f.beatenBy(serverCPU) {
		s += ": less, so it bounds nothing here"
	}
	return s
}

// extraInt reads an integer Extra value of r (0 when absent).
func extraInt(r record, key string) int64 {
	switch v := r.Extra[key].(type) {
	case int64:
		return v
	case int:
		return int64(v)
	case float64:
		return int64(v)
	}
	return 0
}
