package replicate

import (
	"context"
	"fmt"
	"strconv"
)

// An attachment goes as a stub only where the target holds its bytes, at
// the revision the written one descends from (the highest generation g of
// its history the target holds, see targetGenerations). Revpos at or
// below g says so only to a target that finds a stub's bytes by the
// digest the stub names (StubChecker.FillsStubsByName false: PouchDB
// Server). CouchDB fills a stub from that ancestor by name and revpos,
// and revpos can lie: an attachment put on a document recreated after
// its deletion has revpos 1, while the target's generation 1 may be the
// old document's, with other bytes under that name; so does revpos 0,
// which CouchDB stores for an attachment written with new_edits=false
// without revpos, and keeps through later edits. The target's ancestor
// is then read back (targetHeldAtts) and an attachment is a stub only if
// that ancestor holds it with the same digest and revpos.

// sameStored: the target holds attachment t with the content of a (same
// digest) and the revpos a's stub will name (CouchDB merges a stub only
// when its revpos equals the stored one).
func sameStored(a, t *Attachment) bool {
	return t != nil && a.Digest != "" && t.Digest == a.Digest && t.RevPos == a.RevPos
}

// unchecked: the target finds a stub's bytes by its digest, so an
// attachment introduced at or below an ancestor it holds goes as a stub
// without reading that ancestor back.
func (r *run) unchecked() bool {
	sc, ok := r.tgt.(StubChecker)
	return ok && !sc.FillsStubsByName()
}

// asStub says whether attachment a of a revision whose generation-g
// ancestor the target holds goes as a stub; held is that ancestor's
// attachments as the target holds them, by name (nil when not read).
func (r *run) asStub(a *Attachment, g int, held map[string]*Attachment) bool {
	if a.RevPos > 0 && a.RevPos <= g && r.unchecked() {
		return true
	}
	return sameStored(a, held[a.Name])
}

// wouldStub: d has an attachment that may go as a stub once the target's
// generation-g ancestor is read back: one introduced at or below g (when
// unchecked is false), or one of revpos 0 not yet read.
func wouldStub(d *Doc, g int, unchecked bool) bool {
	for _, a := range d.Atts {
		if a.RevPos > 0 && a.RevPos <= g && !unchecked || a.Data == nil && a.RevPos <= 0 {
			return true
		}
	}
	return false
}

// hasZeroRevpos: d has an attachment of revpos 0 still to resolve.
func hasZeroRevpos(d *Doc) bool {
	for _, a := range d.Atts {
		if a.Data == nil && a.RevPos <= 0 {
			return true
		}
	}
	return false
}

// targetHeldAtts reads back from the target (StubChecker.ReadHeld), for
// each revision with an attachment that may go as a stub (wouldStub)
// whose generation-g ancestor the target holds, that ancestor's
// attachments, by name: then only those it holds with the same digest
// and revpos go as stubs, and the bytes of the others travel. One request
// per call (a batch's fetched revisions), none when no revision would
// carry a stub: an edited document whose attachments are unchanged costs
// the read of its ancestor's body, never its attachments' bytes. A target
// without the ability gets every attachment's bytes. An ancestor deleted,
// or not answered, holds nothing.
func (r *run) targetHeldAtts(ctx context.Context, docs []*Doc, have map[string]int) (map[string]map[string]*Attachment, error) {
	sc, ok := r.tgt.(StubChecker)
	if !ok {
		return nil, nil
	}
	unchecked := !sc.FillsStubsByName()
	var reqs []RevRequest
	asked := map[string]bool{} // id NUL ancestor rev
	anc := map[string]string{} // id NUL rev -> id NUL ancestor rev
	for _, d := range docs {
		key := d.ID + "\x00" + d.Rev
		g := have[key]
		i := d.Revisions.Start - g
		if g <= 0 || i <= 0 || i >= len(d.Revisions.IDs) || !wouldStub(d, g, unchecked) {
			continue
		}
		rev := strconv.Itoa(g) + "-" + d.Revisions.IDs[i]
		k := d.ID + "\x00" + rev
		anc[key] = k
		if !asked[k] {
			asked[k] = true
			reqs = append(reqs, RevRequest{ID: d.ID, Rev: rev})
		}
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	got, err := sc.ReadHeld(ctx, reqs)
	if err != nil {
		return nil, fmt.Errorf("target: read back ancestors: %w", err)
	}
	byAnc := map[string]map[string]*Attachment{}
	for _, t := range got {
		if t.Deleted || !asked[t.ID+"\x00"+t.Rev] {
			continue
		}
		m := map[string]*Attachment{}
		for _, a := range t.Atts {
			m[a.Name] = a
		}
		byAnc[t.ID+"\x00"+t.Rev] = m
	}
	out := map[string]map[string]*Attachment{}
	for key, k := range anc {
		if m, ok := byAnc[k]; ok {
			out[key] = m
		}
	}
	return out, nil
}
