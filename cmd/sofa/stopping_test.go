package main

import (
	"io"
	"log"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestStoppingLine: the first interrupt of a verb that only reads says
// nothing of writes or checkpoints; the others say they finish them.
func TestStoppingLine(t *testing.T) {
	defer runningCmd.Store(runningCmd.Load())
	for name, checkpoints := range map[string]bool{"verify": false, "ls": false, "backup": false, "replicate": true, "restore": true} {
		runningCmd.Store(&cobra.Command{Use: name})
		if got := stoppingLine(); strings.Contains(got, "checkpoints") != checkpoints {
			t.Errorf("%s: %q", name, got)
		}
	}
}

// TestStdLog: the standard logger (net/http's "Unsolicited response
// received on idle HTTP channel", printed when a CouchDB cluster node is
// lost) prints nothing without --debug, and a prefixed line with it.
func TestStdLog(t *testing.T) {
	defer log.SetOutput(log.Writer())
	defer log.SetPrefix(log.Prefix())
	defer log.SetFlags(log.Flags())
	stdLog([]string{"backup", "http://x", "a.sofa"})
	if log.Writer() != io.Discard {
		t.Errorf("without --debug the standard logger writes to %v", log.Writer())
	}
	stdLog([]string{"backup", "--debug", "http://x", "a.sofa"})
	if log.Writer() != os.Stderr || log.Prefix() != "sofa: debug: " || log.Flags() != 0 {
		t.Errorf("with --debug: writer %v, prefix %q, flags %d", log.Writer(), log.Prefix(), log.Flags())
	}
}
