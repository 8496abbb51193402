package main

import (
	"encoding/json"
	"fmt"
	"io"

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
	Failures      []replicate.DocError `json:"failures"`
	Warnings      []string             `json:"warnings,omitempty"`
}

func resultJSON(res *replicate.Result, err error) resultDoc {
	d := resultDoc{Status: "ok", ReplicationID: res.ReplicationID, StartSeq: res.StartSeq.String(),
		EndSeq: res.EndSeq.String(), Seconds: res.Duration.Seconds(), Stats: res.Stats,
		Failures: res.Failures, Warnings: res.Warnings}
	if d.Failures == nil {
		d.Failures = []replicate.DocError{}
	}
	switch {
	case err != nil && codeOf(err) == exitInterrupted:
		d.Status, d.Error = "interrupted", err.Error()
	case err != nil:
		d.Status, d.Error = "failed", err.Error()
	case len(res.Failures) > 0:
		d.Status = "partial"
	}
	return d
}

func printJSON(w io.Writer, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(w, string(b))
}

func printSummary(w io.Writer, res *replicate.Result) {
	s := res.Stats
	rate := 0.0
	if sec := res.Duration.Seconds(); sec > 0 {
		rate = float64(s.DocsWritten) / sec
	}
	fmt.Fprintf(w, "sofa: done in %.1fs: docs_read=%d docs_written=%d doc_write_failures=%d missing_checked=%d missing_found=%d bytes=%d (%s, %.0f revisions/s) seq %s -> %s\n",
		res.Duration.Seconds(), s.DocsRead, s.DocsWritten, s.DocWriteFailures, s.MissingChecked, s.MissingFound,
		s.Bytes, humanBytes(s.Bytes), rate, res.StartSeq.String(), res.EndSeq.String())
	for _, f := range res.Failures {
		fmt.Fprintf(w, "sofa: not copied: id=%q rev=%s: %s: %s\n", shorten(f.ID), f.Rev, f.Error, f.Reason)
	}
}

func shorten(id string) string {
	if len(id) > 120 {
		return fmt.Sprintf("%s...(%d bytes)", id[:100], len(id))
	}
	return id
}
