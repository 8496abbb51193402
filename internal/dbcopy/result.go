package dbcopy

import (
	"time"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/replicate"
)

// FillResult adds a replication's counters and failures to r (nil res:
// nothing to add).
func FillResult(r *fleet.DBResult, res *replicate.Result) {
	if res == nil {
		return
	}
	st := res.Stats
	r.Merge(fleet.DBResult{DocsRead: st.DocsRead, DocsWritten: st.DocsWritten, DocWriteFailures: st.DocWriteFailures,
		MissingChecked: st.MissingChecked, MissingFound: st.MissingFound, Bytes: st.Bytes, Failures: res.Failures})
}

// Progress receives one database's counters as they grow (package
// sofa's DBProgress; a nil one is not allowed, use a no-op).
type Progress interface {
	AddDocsRead(n int64)
	AddDocsWritten(n int64)
	AddDocWriteFailures(n int64)
	AddBytes(n int64)
}

// FeedProgress copies engine counters into p every 250 ms; the function
// it returns stops it after a last copy.
func FeedProgress(c *replicate.Counters, p Progress) func() {
	done := make(chan struct{})
	var last replicate.Stats
	push := func() {
		s := c.Snapshot()
		p.AddDocsRead(s.DocsRead - last.DocsRead)
		p.AddDocsWritten(s.DocsWritten - last.DocsWritten)
		p.AddDocWriteFailures(s.DocWriteFailures - last.DocWriteFailures)
		p.AddBytes(s.Bytes - last.Bytes)
		last = s
	}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				push()
				return
			case <-t.C:
				push()
			}
		}
	}()
	return func() { close(done); <-finished }
}
