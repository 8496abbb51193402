package sofa_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/storage"
)

// TestPlanRestore_ChainErrorNamesArchives: a broken chain's error numbers
// the archives in the order given and says which names those are.
func TestPlanRestore_ChainErrorNamesArchives(t *testing.T) {
	ctx := context.Background()
	st := &storage.Memory{}
	exampleArchive(st, "monday.sofa", 3)
	exampleArchive(st, "tuesday.sofa", 4)
	chain, err := openAll(ctx, st, "monday.sofa", "tuesday.sofa")
	if err != nil {
		t.Fatal(err)
	}
	_, err = sofa.PlanRestore(ctx, chain, sofa.RestoreOptions{})
	if !errors.Is(err, archive.ErrChain) || !strings.Contains(err.Error(), "archive 2 (") || !strings.Contains(err.Error(), "(archives in the order given: 1: monday.sofa, 2: tuesday.sofa)") {
		t.Errorf("two full archives: %v; want ErrChain naming both files", err)
	}
}
