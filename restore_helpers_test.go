package sofa_test

import (
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// restoreWarnings restores archives into dst with o, fails the test
// unless the restore is complete, and returns the databases' warnings.
func restoreWarnings(t *testing.T, archives []*sofa.Endpoint, dst *couchtest.Server, o sofa.RestoreOptions) []string {
	t.Helper()
	plan, err := sofa.PlanRestore(t.Context(), archives, o)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := plan.Run(t.Context(), openAt(t, dst.URL, nil))
	if err != nil || !sum.Complete() {
		t.Fatalf("restore: %+v, %v", sum, err)
	}
	var ws []string
	for _, r := range sum.DBs {
		ws = append(ws, r.Warnings...)
	}
	return ws
}
