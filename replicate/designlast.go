package replicate

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
)

// DesignLast wraps a Target so that design documents are written after
// every other document: a validate_doc_update function restored early
// would judge the documents restored after it. It holds back `_design/`
// revisions (copied, since the engine drops bytes once written) and, while
// any is held, the checkpoints too, so a checkpoint never covers a design
// document not yet written. Finish writes them and the last checkpoint.
type DesignLast struct {
	Target
	mu       sync.Mutex
	held     []*Doc
	cpID     string
	cpBody   []byte
	finished bool
}

// NewDesignLast wraps t.
func NewDesignLast(t Target) *DesignLast { return &DesignLast{Target: t} }

// WriteDocs writes the non-design revisions and holds the design ones.
func (d *DesignLast) WriteDocs(ctx context.Context, docs []*Doc) ([]DocError, error) {
	var now []*Doc
	d.mu.Lock()
	for _, doc := range docs {
		if strings.HasPrefix(doc.ID, "_design/") && !d.finished {
			d.held = append(d.held, cloneDoc(doc))
		} else {
			now = append(now, doc)
		}
	}
	d.mu.Unlock()
	if len(now) == 0 {
		return nil, nil
	}
	return d.Target.WriteDocs(ctx, now)
}

// PutLocal defers checkpoints while design documents are held.
func (d *DesignLast) PutLocal(ctx context.Context, id string, body []byte) error {
	d.mu.Lock()
	if len(d.held) > 0 && !d.finished {
		d.cpID, d.cpBody = id, bytes.Clone(body)
		d.mu.Unlock()
		return nil
	}
	d.mu.Unlock()
	return d.Target.PutLocal(ctx, id, body)
}

// GetLocal answers a deferred checkpoint as written (the engine re-reads
// what it wrote), else asks the target.
func (d *DesignLast) GetLocal(ctx context.Context, id string) ([]byte, error) {
	d.mu.Lock()
	if d.cpID == id && d.cpBody != nil {
		b := bytes.Clone(d.cpBody)
		d.mu.Unlock()
		return b, nil
	}
	d.mu.Unlock()
	return d.Target.GetLocal(ctx, id)
}

// LocalRev is the target's (LocalRevver): the `_rev` its last PutLocal of
// id gave, so that a checkpoint written through needs no re-read. While
// the checkpoint is held back it is false (GetLocal answers that one).
func (d *DesignLast) LocalRev(id string) (string, bool) {
	d.mu.Lock()
	held := d.cpID == id && d.cpBody != nil && !d.finished
	d.mu.Unlock()
	lr, ok := d.Target.(LocalRevver)
	if held || !ok {
		return "", false
	}
	return lr.LocalRev(id)
}

// Finish writes the held design documents, then the deferred checkpoint,
// unless the target refused one of them: the checkpoint never covers a
// revision not written, so a rerun reads the database again and tries
// them. The returned DocErrors name design revisions the target refused.
func (d *DesignLast) Finish(ctx context.Context) ([]DocError, error) {
	d.mu.Lock()
	held, id, body := d.held, d.cpID, d.cpBody
	d.held, d.finished = nil, true
	d.mu.Unlock()
	var fails []DocError
	for _, doc := range held {
		f, err := d.Target.WriteDocs(ctx, []*Doc{doc})
		if err != nil {
			return fails, err
		}
		fails = append(fails, f...)
	}
	if body != nil && len(fails) == 0 {
		if err := d.putCheckpoint(ctx, id, body); err != nil {
			return fails, err
		}
	}
	return fails, nil
}

// putCheckpoint writes the deferred checkpoint over whatever revision of
// it the target holds.
func (d *DesignLast) putCheckpoint(ctx context.Context, id string, body []byte) error {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return err
	}
	delete(doc, "_rev")
	if cur, err := d.Target.GetLocal(ctx, id); err == nil {
		var old struct {
			Rev string `json:"_rev"`
		}
		if json.Unmarshal(cur, &old) == nil && old.Rev != "" {
			doc["_rev"], _ = json.Marshal(old.Rev)
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return d.Target.PutLocal(ctx, id, b)
}

// Held is the number of design revisions waiting for Finish.
func (d *DesignLast) Held() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.held)
}

func cloneDoc(doc *Doc) *Doc {
	c := *doc
	c.Body = bytes.Clone(doc.Body)
	c.Revisions.IDs = append([]string(nil), doc.Revisions.IDs...)
	c.Atts = make([]*Attachment, len(doc.Atts))
	for i, a := range doc.Atts {
		ac := *a
		ac.Data = bytes.Clone(a.Data)
		c.Atts[i] = &ac
	}
	return &c
}

// ReportsPossibleAncestors is the wrapped target's (see
// ancestorsReported): a wrapper hides no stub the target could take.
func (d *DesignLast) ReportsPossibleAncestors() bool {
	t, ok := d.Target.(interface{ ReportsPossibleAncestors() bool })
	return ok && t.ReportsPossibleAncestors()
}

// FillsStubsByName is the wrapped target's (StubChecker); true when it
// cannot say, so that no stub goes unchecked.
func (d *DesignLast) FillsStubsByName() bool {
	sc, ok := d.Target.(StubChecker)
	return !ok || sc.FillsStubsByName()
}

// DropsTombstoneAttachments is the wrapped target's
// (TombstoneAttachmentsDropper).
func (d *DesignLast) DropsTombstoneAttachments() bool {
	t, ok := d.Target.(TombstoneAttachmentsDropper)
	return ok && t.DropsTombstoneAttachments()
}

// ReadHeld reads back from the wrapped target (StubChecker); a target
// without the ability answers nothing, so every attachment travels.
func (d *DesignLast) ReadHeld(ctx context.Context, reqs []RevRequest) ([]*Doc, error) {
	sc, ok := d.Target.(StubChecker)
	if !ok {
		return nil, nil
	}
	return sc.ReadHeld(ctx, reqs)
}
