package sofa

import (
	"context"
	"slices"
	"strings"

	"github.com/sofadb/sofa/internal/dbcopy"
	"github.com/sofadb/sofa/replicate"
)

// refusedByValidation says a failure is a validate_doc_update's refusal
// (CouchDB's 403 forbidden or 401 unauthorized for one document) of a
// document other than a design document: design documents are written
// last, so nothing written after them changes their fate (a refused one
// is most often an account that is not the database's admin).
func refusedByValidation(f replicate.DocError) bool {
	return f.ID != "" && !strings.HasPrefix(f.ID, "_design/") && (f.Error == "forbidden" || f.Error == "unauthorized")
}

func countRefused(fs []replicate.DocError) int {
	n := 0
	for _, f := range fs {
		if refusedByValidation(f) {
			n++
		}
	}
	return n
}

// retryRefusedOnce copies c's database once more, from the checkpoint the
// first copy left before the first revision not copied (`_revs_diff`
// finds only what the target lacks), after a copy some of whose revisions a
// validate_doc_update refused. A restore writes a database's design
// documents last, so in a chain of archives the documents of a later
// archive meet the validate_doc_update of an earlier one, which its own
// design documents, written at its end, may replace with one that
// accepts them (as the source did). The refusals are dropped from c's
// result first: what the second copy still finds refused is reported
// again. A source that can be read only once is left as reported.
func (j *pairJob) retryRefusedOnce(ctx context.Context, c *dbCopy, src replicate.Source, opts replicate.Options) error {
	again, done, err := j.rereadSource(ctx, c.task, src, false)
	if err != nil {
		return err
	}
	if again == nil {
		return nil
	}
	defer done()
	kept := c.r.Failures[:0]
	n := int64(0)
	for _, f := range c.r.Failures {
		if refusedByValidation(f) {
			n++
			continue
		}
		kept = append(kept, f)
	}
	c.r.Failures = kept
	c.r.DocWriteFailures -= n
	c.p.AddDocWriteFailures(-n) // the progress says what the summary says
	j.rc.logf("%s: %d revisions refused by a validate_doc_update; copying once more now that the design documents are written", c.task.Target, n)
	// From the checkpoint the first copy left before the first refused
	// revision (read again: what was read before the copy is stale).
	opts.TargetCreated, opts.TargetInfo, opts.TargetCheckpoint = nil, nil, nil
	opts.Counters = &replicate.Counters{}
	stop := dbcopy.FeedProgress(opts.Counters, c.p)
	err = j.copyOnce(ctx, c, again, opts, true)
	stop()
	if err != nil {
		return err
	}
	if len(c.r.Failures) == 0 {
		c.r.Warnings = slices.DeleteFunc(c.r.Warnings, func(w string) bool { return w == replicate.WarnCheckpointHeld })
	}
	return nil
}
