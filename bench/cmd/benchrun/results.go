package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
)

// record is one JSON line of the results file: one tool on one case, one
// run (Run 1..n) or the median of the runs (Run 0, Stat "median").
type record struct {
	Bench string `json:"bench"` // replicate, latency, fleet, controller, backup
	Case  string `json:"case"`  // the data set or setting, e.g. "10000 docs x 1 KiB"
	Tool  string `json:"tool"`
	Run   int    `json:"run,omitempty"`
	Stat  string `json:"stat,omitempty"` // "median" on summary records
	OK    bool   `json:"ok"`
	usage
	// TimeMS is the time the ratios use: WallMS, except for tools that
	// time their own work after an untimed preparation (the bound).
	TimeMS int64 `json:"time_ms"`
	// Docs is the revisions (or documents) the tool reports writing.
	Docs int64 `json:"docs,omitempty"`
	// ArchiveBytes is the size of a backup's output; GzipBytes that
	// output after gzip -6 (equal to ArchiveBytes for compressed formats).
	ArchiveBytes int64 `json:"archive_bytes,omitempty"`
	GzipBytes    int64 `json:"gzip_bytes,omitempty"`
	// Requests and Throttled: HTTP requests the tool sent (as it or the
	// proxy counted them) and 429 answers among them.
	Requests  int64 `json:"requests,omitempty"`
	Throttled int64 `json:"throttled,omitempty"`
	// ServerCPUMS is the CPU time the PouchDB Servers spent during the run.
	ServerCPUMS int64 `json:"server_cpu_ms,omitempty"`
	// ServerReductions is the work the CouchDB servers did during the run
	// in Erlang reductions (GET /_node/_local/_system): unlike CPU time it
	// counts neither the schedulers' busy waiting nor the time other
	// processes take from them, so it compares runs on a loaded machine.
	ServerReductions int64 `json:"server_reductions,omitempty"`
	// Verify is the untimed check of the copy: "equal", or what differs.
	Verify string         `json:"verify,omitempty"`
	Note   string         `json:"note,omitempty"`
	Error  string         `json:"error,omitempty"`
	Extra  map[string]any `json:"extra,omitempty"`
}

// sink appends records to the results file as JSON lines.
type sink struct {
	mu sync.Mutex
	f  *os.File
}

func openSink(path string) (*sink, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &sink{f: f}, nil
}

func (s *sink) write(r record) {
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.f.Write(append(b, '\n'))
}

func (s *sink) close() error { return s.f.Close() }

// median returns a summary record of runs (all of one case and tool):
// each measure is the median over the runs, OK only when every run was.
func median(runs []record) record {
	if len(runs) == 0 {
		return record{}
	}
	m := runs[0]
	m.Run, m.Stat, m.Error = 0, "median", ""
	pick := func(get func(r record) int64) int64 {
		v := make([]int64, len(runs))
		for i, r := range runs {
			v[i] = get(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	m.WallMS = pick(func(r record) int64 { return r.WallMS })
	m.TimeMS = pick(func(r record) int64 { return r.TimeMS })
	m.UserMS = pick(func(r record) int64 { return r.UserMS })
	m.SysMS = pick(func(r record) int64 { return r.SysMS })
	m.CPUMS = pick(func(r record) int64 { return r.CPUMS })
	m.MaxRSSKB = pick(func(r record) int64 { return r.MaxRSSKB })
	m.ServerCPUMS = pick(func(r record) int64 { return r.ServerCPUMS })
	m.ServerReductions = pick(func(r record) int64 { return r.ServerReductions })
	m.Requests = pick(func(r record) int64 { return r.Requests })
	m.OK = true
	var errs []string
	for _, r := range runs {
		if !r.OK {
			m.OK = false
			errs = append(errs, fmt.Sprintf("run %d: %s", r.Run, firstNonEmpty(r.Error, r.Verify)))
		}
	}
	m.Error = strings.Join(errs, "; ")
	m.Extra = map[string]any{"runs": len(runs)}
	return m
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// table is a plain text table printed with aligned columns.
type table struct {
	title string
	head  []string
	rows  [][]string
	notes []string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }
func (t *table) note(format string, args ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, args...))
}

func (t *table) print(w io.Writer) {
	fmt.Fprintf(w, "\n== %s\n", t.title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.head, "\t"))
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
	for _, n := range t.notes {
		fmt.Fprintln(w, "  "+n)
	}
}

// Cell formatters.
func secs(ms int64) string { return fmt.Sprintf("%.2f", float64(ms)/1000) }
func mib(kb int64) string  { return fmt.Sprintf("%.0f", float64(kb)/1024) }
func mibBytes(b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(b)/(1<<20))
}
func status(r record) string {
	switch {
	case r.OK:
		return "ok"
	case r.Error != "":
		return "FAILED"
	default:
		return "INCOMPLETE"
	}
}

// ratio formats a/b, "n/a" when either side is missing or failed.
func ratio(a, b int64) string {
	if a <= 0 || b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}

// check formats "VALUE (target OP GOAL: met|NOT met)".
func check(val string, a, b int64, op string, goal float64) string {
	if a <= 0 || b <= 0 {
		return val + " (not measured)"
	}
	r := float64(a) / float64(b)
	met := (op == "<=" && r <= goal) || (op == ">=" && r >= goal)
	verdict := "met"
	if !met {
		verdict = "NOT met"
	}
	return fmt.Sprintf("%s (target %s %g: %s)", val, op, goal, verdict)
}

// usageRow returns the common cells: status, time, wall, CPU, peak RSS.
func usageRow(r record) []string {
	return []string{status(r), secs(r.TimeMS), secs(r.CPUMS), mib(r.MaxRSSKB), secs(r.ServerCPUMS)}
}

var usageHead = []string{"status", "time s", "cpu s", "peak rss MiB", "server cpu s"}
