package main

import (
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
