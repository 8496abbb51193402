package sofa

import (
	"testing"
	"time"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/limitstats"
)

// mergeChainResults folds a database restored from several archives
// into one result and keeps every field of the run that is not a count
// of databases (a chain's or a set's left-out _replicator, its hosts and
// concurrency were dropped).
func TestMergeChainResults_KeepsRunFields(t *testing.T) {
	s := fleet.Summary{
		Started: time.Unix(100, 0), Duration: fleet.Duration(3 * time.Second), Interrupted: true, TotalUnknown: true, ArchiveNotWritten: true,
		LeftOut:        []fleet.LeftOut{{Name: "_replicator", Reason: "r"}},
		MissingMembers: []string{"m.shard-1-of-2.sofa"},
		Hosts:          []limitstats.Stats{{}},
		Concurrency:    fleet.Concurrency{Peak: 7},
		RequestsByKind: map[string]map[string]int64{"target": {"PUT /db": 1}},
	}
	s.Add(fleet.DBResult{Name: "a", Status: fleet.StatusOK, DocsWritten: 2})
	s.Add(fleet.DBResult{Name: "b", Status: fleet.StatusOK, DocsWritten: 1})
	s.Add(fleet.DBResult{Name: "a", Status: fleet.StatusOK, DocsWritten: 3})
	mergeChainResults(&s)
	if s.DBsTotal != 2 || s.DocsWritten != 6 || len(s.DBs) != 2 || s.DBs[0].DocsWritten != 5 {
		t.Errorf("merged counts: %d databases, %d docs written, %+v", s.DBsTotal, s.DocsWritten, s.DBs)
	}
	if len(s.LeftOut) != 1 || len(s.MissingMembers) != 1 || len(s.Hosts) != 1 || s.Concurrency.Peak != 7 ||
		s.RequestsByKind["target"]["PUT /db"] != 1 || !s.Interrupted || !s.ArchiveNotWritten || !s.TotalUnknown || s.Duration == 0 || !s.Started.Equal(time.Unix(100, 0)) {
		t.Errorf("run fields lost in the merge: %+v", s)
	}
}
