package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/replicate"
)

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

type resultDoc struct {
	Status        string               `json:"status"` // ok, partial, failed, interrupted
	Error         string               `json:"error,omitempty"`
	ReplicationID string               `json:"replication_id,omitempty"`
	StartSeq      string               `json:"start_seq"`
	EndSeq        string               `json:"end_seq"`
	Seconds       float64              `json:"seconds"`
	Stats         replicate.Stats      `json:"stats"`
	HTTP          httpSummary          `json:"http"`
	Failures      []replicate.DocError `json:"failures"`
	Warnings      []string             `json:"warnings,omitempty"`
	// ExitCode is the process's exit code (the table of sofa -h).
	ExitCode int `json:"exit_code"`
}

// httpSummary is the HTTP work of a run over both endpoints: attempts
// sent, attempts repeated after a failure, 429/503 answers among them, and
// the time spent waiting before retries (backoff and Retry-After).
type httpSummary struct {
	Requests      int64   `json:"requests"`
	Retries       int64   `json:"retries"`
	Throttled     int64   `json:"throttled"`
	WaitedSeconds float64 `json:"waited_seconds"`
}

func sumHTTP(cs []*couch.Counters) httpSummary {
	var h httpSummary
	var waited time.Duration
	for _, c := range cs {
		h.Requests += c.Requests.Load()
		h.Retries += c.Retries.Load()
		h.Throttled += c.Throttled.Load()
		waited += time.Duration(c.WaitNanos.Load())
	}
	h.WaitedSeconds = waited.Seconds()
	return h
}

func resultJSON(res *replicate.Result, h httpSummary, err error) resultDoc {
	d := resultDoc{Status: "ok", ReplicationID: res.ReplicationID, StartSeq: res.StartSeq.String(),
		EndSeq: res.EndSeq.String(), Seconds: res.Duration.Seconds(), Stats: res.Stats, HTTP: h,
		Failures: res.Failures, Warnings: res.Warnings}
	if d.Failures == nil {
		d.Failures = []replicate.DocError{}
	}
	switch {
	case errors.Is(err, context.Canceled):
		d.Status, d.Error = "interrupted", err.Error()
	case err != nil:
		d.Status, d.Error = "failed", err.Error()
	case len(res.Failures) > 0:
		d.Status = "partial"
	}
	return d
}

func printJSON(w io.Writer, v any) {
	jsonMu.Lock()
	defer jsonMu.Unlock()
	writeJSON(w, v)
}

// writeJSON prints v as printJSON does, with jsonMu held.
func writeJSON(w io.Writer, v any) {
	jsonPrinted.Store(true)
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(w, string(b))
}

// printSummary prints the counters of a run; failed says it stopped on a
// fatal error (printed after the summary).
func printSummary(w io.Writer, res *replicate.Result, h httpSummary, failed bool) {
	s := res.Stats
	rate := 0.0
	if sec := res.Duration.Seconds(); sec > 0 {
		rate = float64(s.DocsWritten) / sec
	}
	ended := "done in"
	if failed {
		ended = "stopped after"
	}
	held := ""
	if slices.Contains(res.Warnings, replicate.WarnCheckpointHeld) {
		held = " (the checkpoint, held before the first revision not copied)"
	}
	fmt.Fprintf(w, "sofa: %s %.1fs: docs_read=%d docs_written=%d doc_write_failures=%d missing_checked=%d missing_found=%d bytes=%d (%s, %.0f revisions/s) seq %s -> %s%s\n",
		ended, res.Duration.Seconds(), s.DocsRead, s.DocsWritten, s.DocWriteFailures, s.MissingChecked, s.MissingFound,
		s.Bytes, humanBytes(s.Bytes), rate, res.StartSeq.String(), res.EndSeq.String(), held)
	fmt.Fprintf(w, "sofa: http: requests=%d retries=%d throttled=%d waited=%.1fs\n", h.Requests, h.Retries, h.Throttled, h.WaitedSeconds)
	printFailures(w, res.Failures)
}

// printFailures lists the revisions not copied: errors, printed under -q
// too.
func printFailures(w io.Writer, failures []replicate.DocError) {
	for _, f := range failures {
		fmt.Fprintf(w, "sofa: not copied: %s\n", failureLine(f))
	}
}

// failureLine is one revision not copied, on one line: the server's
// error and reason folded and cut (replicate.OneLine), the id shortened.
func failureLine(f replicate.DocError) string {
	what := fmt.Sprintf("%s: %s", replicate.OneLine(f.Error, replicate.MaxReasonBytes), replicate.OneLine(f.Reason, replicate.MaxReasonBytes))
	if f.ID == "" && f.Rev == "" {
		return what // of the database, not of a document (a check's summary)
	}
	return fmt.Sprintf("id=%q rev=%s: %s", shorten(f.ID), f.Rev, what)
}

func shorten(id string) string {
	if len(id) > 120 {
		return fmt.Sprintf("%s...(%d bytes)", id[:100], len(id))
	}
	return id
}
