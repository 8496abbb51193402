package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

// The summary's "seq A -> B" says when B is a checkpoint held back by a
// revision not copied (a run that copied everything else otherwise reads
// as if it had not moved).
func TestSummary_HeldCheckpointSaid(t *testing.T) {
	res := &replicate.Result{StartSeq: replicate.Seq(`0`), EndSeq: replicate.Seq(`0`)}
	res.Stats.DocsWritten, res.Stats.DocWriteFailures = 9, 1
	var plain, held bytes.Buffer
	printSummary(&plain, res, httpSummary{}, false)
	res.Warnings = []string{replicate.WarnCheckpointHeld}
	printSummary(&held, res, httpSummary{}, false)
	if strings.Contains(plain.String(), "held") {
		t.Errorf("no warning, yet the summary says held: %s", plain.String())
	}
	if !strings.Contains(held.String(), "seq 0 -> 0 (the checkpoint, held before the first revision not copied)") {
		t.Errorf("summary %q does not say the checkpoint is held", held.String())
	}
}
