package sofa

import (
	"testing"
	"time"

	"github.com/sofadb/sofa/archive"
)

// Spread is the span of the present members' start times; a missing
// member does not count.
func TestArchiveSet_Spread(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	s := &ArchiveSet{
		byShard: []*Endpoint{{}, nil, {}},
		headers: []archive.Header{{Created: t0.Add(2 * time.Hour)}, {Created: t0.Add(9 * time.Hour)}, {Created: t0}},
	}
	if got := s.Spread(); got != 2*time.Hour {
		t.Errorf("Spread %v, want 2h (the missing member's header left out)", got)
	}
}
