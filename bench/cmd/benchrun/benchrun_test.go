package main

import (
	"slices"
	"strings"
	"testing"
)

func TestMedianTakesEachMeasureSeparately(t *testing.T) {
	runs := []record{
		{Tool: "x", Run: 1, OK: true, TimeMS: 300, usage: usage{CPUMS: 10, MaxRSSKB: 900}},
		{Tool: "x", Run: 2, OK: true, TimeMS: 100, usage: usage{CPUMS: 30, MaxRSSKB: 100}},
		{Tool: "x", Run: 3, OK: true, TimeMS: 200, usage: usage{CPUMS: 20, MaxRSSKB: 500}},
	}
	m := median(runs)
	if m.TimeMS != 200 || m.CPUMS != 20 || m.MaxRSSKB != 500 {
		t.Errorf("median = time %d cpu %d rss %d, want 200 20 500", m.TimeMS, m.CPUMS, m.MaxRSSKB)
	}
	if !m.OK || m.Stat != "median" || m.Run != 0 {
		t.Errorf("median = ok %v stat %q run %d", m.OK, m.Stat, m.Run)
	}
	runs[1].OK, runs[1].Error = false, "boom"
	if m := median(runs); m.OK || !strings.Contains(m.Error, "run 2: boom") {
		t.Errorf("median with a failed run = ok %v error %q", m.OK, m.Error)
	}
}

func TestApplyPeersSumsLinesAndCountsFailures(t *testing.T) {
	o := &outcome{Stdout: []byte(`noise
{"tool":"a","ok":true,"ms":5,"docs":10}
{"tool":"a","ok":false,"error":"missing_stub"}
{"tool":"a","ok":true,"ms":5,"docs":7}
`)}
	r := record{OK: true}
	applyPeers(&r, o, 3)
	if r.Docs != 17 {
		t.Errorf("docs = %d, want 17", r.Docs)
	}
	if r.OK || !strings.Contains(r.Error, "1 of 3") || !strings.Contains(r.Error, "missing_stub") {
		t.Errorf("ok %v error %q", r.OK, r.Error)
	}
	// A database that printed nothing is a failure too.
	r = record{OK: true}
	applyPeers(&r, &outcome{Stdout: []byte(`{"tool":"a","ok":true,"docs":1}`)}, 2)
	if r.OK {
		t.Error("a missing result line was not counted as a failure")
	}
}

func TestApplySofaReadsBothShapes(t *testing.T) {
	one := &outcome{Stdout: []byte("{\n  \"status\": \"ok\",\n  \"stats\": {\"docs_written\": 42},\n  \"http\": {\"requests\": 9, \"throttled\": 1}\n}\n")}
	r := record{OK: true}
	applySofa(&r, one)
	if r.Docs != 42 || r.Requests != 9 || r.Throttled != 1 {
		t.Errorf("one db: docs %d requests %d throttled %d", r.Docs, r.Requests, r.Throttled)
	}
	server := &outcome{Stdout: []byte(`{"dbs_total":2,"dbs_ok":2,"docs_written":5,"hosts":[{"host":"a","requests":3},{"host":"b","requests":4}]}`)}
	r = record{OK: true}
	applySofa(&r, server)
	if r.Docs != 5 || r.Requests != 7 {
		t.Errorf("server: docs %d requests %d", r.Docs, r.Requests)
	}
	r = record{OK: true}
	applySofa(&r, &outcome{Stdout: []byte("not json")})
	if r.OK {
		t.Error("output without JSON was accepted")
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		a, b int64
		op   string
		goal float64
		want string
	}{
		{150, 100, "<=", 1.5, "met"},
		{151, 100, "<=", 1.5, "NOT met"},
		{300, 100, ">=", 3, "met"},
		{299, 100, ">=", 3, "NOT met"},
		{0, 100, ">=", 3, "not measured"},
	} {
		got := check(ratio(c.a, c.b), c.a, c.b, c.op, c.goal)
		if !strings.Contains(got, c.want) || (c.want == "met" && strings.Contains(got, "NOT")) {
			t.Errorf("check(%d/%d %s %g) = %q, want %s", c.a, c.b, c.op, c.goal, got, c.want)
		}
	}
}

func TestIntList(t *testing.T) {
	var l intList
	if err := l.Set("4, 8,16"); err != nil || l.String() != "4,8,16" {
		t.Errorf("Set = %v, %q", err, l.String())
	}
	if err := l.Set("4,0"); err == nil {
		t.Error("0 accepted")
	}
	if err := l.Set("x"); err == nil {
		t.Error("x accepted")
	}
}

func TestShellQuote(t *testing.T) {
	if got := shellQuote("a'b c"); got != `'a'\''b c'` {
		t.Errorf("shellQuote = %s", got)
	}
}

func TestPairList(t *testing.T) {
	var l pairList
	if err := l.Set("8/40, 16/80"); err != nil {
		t.Fatal(err)
	}
	if got := l.String(); got != "8/40,16/80" {
		t.Errorf("String() = %q, want 8/40,16/80", got)
	}
	for _, bad := range []string{"8", "8/0", "a/b", "8/40,", "-1/2"} {
		var l pairList
		if err := l.Set(bad); err == nil {
			t.Errorf("Set(%q): no error", bad)
		}
	}
}

// Backup runs put every tool first in turn: odd runs in the listed order,
// even runs reversed.
func TestRunOrderAlternates(t *testing.T) {
	tools := []string{"sofa", "couchbackup", "sofa-alt"}
	if got := runOrder(tools, 1); !slices.Equal(got, tools) {
		t.Errorf("run 1: %v, want %v", got, tools)
	}
	if got, want := runOrder(tools, 2), []string{"sofa-alt", "couchbackup", "sofa"}; !slices.Equal(got, want) {
		t.Errorf("run 2: %v, want %v", got, want)
	}
	if got := runOrder(tools, 3); !slices.Equal(got, tools) {
		t.Errorf("run 3: %v, want %v", got, tools)
	}
	if tools[0] != "sofa" {
		t.Errorf("runOrder changed its argument: %v", tools)
	}
}

func TestFleetMedianSkipsUnmeasured(t *testing.T) {
	runs := []fleetRun{{full: 1.37}, {full: 0}, {full: 1.14}, {full: 1.22}}
	m, all := fleetMedian(runs, func(r fleetRun) float64 { return r.full })
	if m != 1.22 || all != "1.37, 1.14, 1.22" {
		t.Errorf("median %v of %q, want 1.22 of \"1.37, 1.14, 1.22\"", m, all)
	}
	if m, all := fleetMedian(runs[1:2], func(r fleetRun) float64 { return r.full }); m != 0 || all != "n/a" {
		t.Errorf("no measured run: %v %q", m, all)
	}
}

func TestFleetVariantsNames(t *testing.T) {
	got := fleetVariants(" --max-dbs 16 ;; --max-dbs=8")
	if want := []string{"sofa --max-dbs 16", "sofa --max-dbs=8"}; !slices.Equal(got, want) {
		t.Errorf("fleetVariants = %q, want %q", got, want)
	}
}
