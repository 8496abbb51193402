package main

import (
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/spf13/cobra"
)

// jsonPrinted records that the run printed its JSON document (printJSON);
// jsonMu orders the documents of the run and of a second interrupt.
var (
	jsonPrinted atomic.Bool
	jsonMu      sync.Mutex
)

// runningCmd is the verb running (set when its flags are applied), for
// the document a second interrupt prints.
var runningCmd atomic.Pointer[cobra.Command]

// failureDoc is what --json prints on stdout when a run ends before its
// verb printed anything there (a bad flag, an unreachable server, wrong
// credentials, a damaged archive): a script reading stdout always gets
// one JSON document. Status is "failed" (exit 1), "usage" (2) or
// "interrupted" (130); Error is the line printed on stderr.
type failureDoc struct {
	Status   string `json:"status"`
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
}

// printFailureJSON prints the failureDoc of exit code and message msg
// when cmd ran with --json (args: its command line) and printed nothing
// on w yet.
func printFailureJSON(w io.Writer, cmd *cobra.Command, args []string, code int, msg string) {
	jsonMu.Lock()
	defer jsonMu.Unlock()
	printFailureJSONLocked(w, cmd, args, code, msg)
}

// printFailureJSONLocked is printFailureJSON with jsonMu held.
func printFailureJSONLocked(w io.Writer, cmd *cobra.Command, args []string, code int, msg string) {
	if code == exitOK || jsonPrinted.Load() || !wantsJSON(cmd, args) {
		return
	}
	writeJSON(w, failureDoc{Status: failureStatus(code), Error: msg, ExitCode: code})
}

// failureStatus is the status of a run stopped with exit code code:
// "usage" (2), "interrupted" (130), else "failed".
func failureStatus(code int) string {
	switch code {
	case exitUsage:
		return "usage"
	case exitInterrupted:
		return "interrupted"
	}
	return "failed"
}

// runStatus is the status of a run that printed its summary and ends
// with exit code code: "ok" (0), "partial" (3), "different" (4), else as
// failureStatus.
func runStatus(code int) string {
	switch code {
	case exitOK:
		return "ok"
	case exitPartial:
		return "partial"
	case exitDifferent:
		return "different"
	}
	return failureStatus(code)
}

// wantsJSON says whether cmd runs with --json: its flag as parsed (from
// the command line, the environment or --config), or, when parsing failed
// before reaching it (an unknown flag), --json on the command line.
func wantsJSON(cmd *cobra.Command, args []string) bool {
	if cmd != nil {
		if f := cmd.Flags().Lookup("json"); f != nil && f.Value.String() == "true" {
			return true
		}
	}
	return slices.Contains(args, "--json") || slices.Contains(args, "--json=true")
}
