package main

import (
	"strings"
	"testing"
)

// TestVerify_ArchiveSecondSaysGiveItFirst: `verify SERVER ARCHIVE` is a
// usage error that says to give the archive first, before any server is
// asked anything.
func TestVerify_ArchiveSecondSaysGiveItFirst(t *testing.T) {
	bin := sofaBin(t)
	r := cliRun(t, bin, "verify", "http://admin:secret-pw@127.0.0.1:1", "backup.sofa")
	r.wantCode(t, exitUsage)
	if !strings.Contains(r.stderr, "give the archive first") || strings.Contains(r.stderr+r.stdout, "secret-pw") {
		t.Errorf("stderr %q, want it to say to give the archive first (and no password)", r.stderr)
	}
}
