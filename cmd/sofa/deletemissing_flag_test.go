package main

import (
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// --delete-missing acts in continuous server mode only; elsewhere it is a
// usage error (exit 2), not silently ignored.
func TestCLI_DeleteMissingOutsideContinuousServers(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	arCreate(t, srv, "dm", true, arSmallDocs("d", 2)...)
	other := couchtest.StartKind(t, srv.Kind)
	for _, args := range [][]string{
		{srv.AdminURL(), other.AdminURL()},
		{srv.AdminURL() + "/dm", srv.AdminURL() + "/dm2", "--continuous"},
	} {
		r := cliRun(t, bin, append(append([]string{"replicate"}, args...), "--delete-missing")...)
		r.wantCode(t, exitUsage)
		if !strings.Contains(r.stderr, "--delete-missing: continuous server mode only") {
			t.Errorf("replicate %v --delete-missing: stderr lacks the reason:\n%s", args, r.stderr)
		}
	}
}
