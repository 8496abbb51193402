package sofa

import (
	"strings"
	"testing"
	"time"

	"github.com/sofadb/sofa/storage"
)

// downStore is a storage.Store whose service has answered nothing for a
// while (or answers, with down zero).
type downStore struct {
	storage.Local
	down time.Duration
}

func (s downStore) Unanswered() (time.Duration, bool) { return s.down, s.down > 0 }
func (s downStore) Service() string                   { return "http://s3.example:9000" }

// The waiting line names an S3 service that stopped answering (found by
// a tester: with S3 gone during a backup it said "no request retried or
// in flight" while the upload was retried).
func TestStallWatch_NamesUnansweredStore(t *testing.T) {
	up := NewStallWatch(&Endpoint{archive: "a.sofa", store: downStore{}})
	if got := up.Waiting(true); strings.Contains(got, "s3.example") {
		t.Errorf("a store that answers: %q", got)
	}
	down := NewStallWatch(&Endpoint{archive: "a.sofa", store: downStore{down: 12 * time.Second}})
	if got := down.Waiting(true); got != "retrying: http://s3.example:9000 has answered no request for 12s" {
		t.Errorf("a store whose service is down: %q", got)
	}
}
