package main

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// TestCLI_DebugLogsEveryBatch: --debug ("log every batch") prints one
// line per batch, whose changes add up to the feed's.
func TestCLI_DebugLogsEveryBatch(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "app", true, arSmallDocs("x", 120)...)
	r := arSofa(t, bin, nil, "replicate", src.URL+"/app", src.URL+"/copy", "--create-target", "--batch-size", "50", "--debug")
	r.want(t, exitOK)
	lines := regexp.MustCompile(`(?m)batch \d+: (\d+) changes to seq \S+, \d+ revisions checked, (\d+) missing, done in `).FindAllStringSubmatch(r.stderr, -1)
	changes, missing := 0, 0
	for _, l := range lines {
		c, _ := strconv.Atoi(l[1])
		m, _ := strconv.Atoi(l[2])
		changes += c
		missing += m
	}
	if len(lines) != 3 || changes != 120 || missing != 120 {
		t.Errorf("--debug logged %d batch lines of %d changes and %d missing revisions in all, want 3 of 120 and 120:\n%s", len(lines), changes, missing, r.stderr)
	}
}
