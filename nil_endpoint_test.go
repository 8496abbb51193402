package sofa_test

import (
	"errors"
	"testing"

	"github.com/sofadb/sofa"
)

// TestNilArguments_Refused: the calls that take endpoints, sets and
// plans refuse nil ones with an *OptionError, as Copy and Backup do,
// instead of a nil dereference; nil endpoints print and close.
func TestNilArguments_Refused(t *testing.T) {
	ctx := t.Context()
	var oe *sofa.OptionError
	refused := func(what string, err error) {
		t.Helper()
		if !errors.As(err, &oe) {
			t.Errorf("%s: %v, want an *OptionError", what, err)
		}
	}
	var nilPlan *sofa.RestorePlan
	_, err := nilPlan.Run(ctx, nil)
	refused("(*RestorePlan)(nil).Run", err)
	refused("CheckDistinct(nil, nil)", sofa.CheckDistinct(nil, nil))
	refused("CheckChain(nil)", sofa.CheckChain(ctx, nil))
	_, err = sofa.OpenSet(ctx, nil, sofa.SetOptions{})
	refused("OpenSet(nil)", err)
	_, err = sofa.PlanRestoreSet(ctx, nil, sofa.RestoreOptions{})
	refused("PlanRestoreSet(nil)", err)
	_, err = sofa.PlanRestoreSets(ctx, nil, sofa.RestoreOptions{})
	refused("PlanRestoreSets(nil)", err)
	_, err = sofa.VerifySet(ctx, nil, nil, sofa.VerifyOptions{})
	refused("VerifySet(nil)", err)
	_, err = sofa.ChainSets(nil)
	refused("ChainSets(nil)", err)
	if sofa.IsSet(ctx, nil) {
		t.Error("IsSet(nil) is true")
	}
	var e *sofa.Endpoint
	if e.String() == "" || e.Close() != nil {
		t.Error("a nil endpoint does not print or close")
	}
	sofa.NewStallWatch(nil).Waiting(true)
}
