package sofa_test

import (
	"errors"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// verify of two database URLs has no databases to select: --include and
// --exclude are refused rather than ignored.
func TestVerifyDatabasesRefuseSelection(t *testing.T) {
	srv := couchtest.Start(t)
	ctx := t.Context()
	c := srv.Client()
	for _, db := range []string{"vsel-a", "vsel-b"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	a, err := sofa.Open(ctx, srv.DBURL("vsel-a"), sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := sofa.Open(ctx, srv.DBURL("vsel-b"), sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sofa.Verify(ctx, a, b, sofa.VerifyOptions{Selection: sofa.Selection{Include: []string{"x*"}}})
	var oe *sofa.OptionError
	if !errors.As(err, &oe) {
		t.Fatalf("verify DB DB --include: %v, want an *OptionError", err)
	}
	if res, err := sofa.Verify(ctx, a, b, sofa.VerifyOptions{}); err != nil || !res.Equal {
		t.Fatalf("verify DB DB: %+v, %v", res, err)
	}
}
