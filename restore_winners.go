package sofa

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/replicate"
)

// winnerLog is the archive source of a restore into a database that held
// documents: it notes, in a temporary file, the archive's winning revision
// of every document as the changes pass, so that afterwards the target's
// winners can be compared without holding every id in memory.
type winnerLog struct {
	*archive.DBReader
	f   *os.File
	w   *bufio.Writer
	enc *json.Encoder
	err error
	// step numbers the archives of a chain noted into one log (with).
	step int
	// couchOrder: the target picks winners as CouchDB does (revision ids
	// of 32 hex digits compared as the bytes they spell); else as
	// PouchDB does (as strings).
	couchOrder bool
}

// with returns a log noting the changes of dbr, a later archive of the
// chain, into the same file: a document it holds is compared with its
// best leaf there (an incremental archive holds every leaf of a document
// it holds), not with those of earlier archives.
func (l *winnerLog) with(dbr *archive.DBReader) *winnerLog {
	if l.err == nil {
		l.err = l.w.Flush()
	}
	return &winnerLog{DBReader: dbr, f: l.f, w: l.w, enc: l.enc, err: l.err, step: l.step + 1, couchOrder: l.couchOrder}
}

// newWinnerLog notes the winners of dbr as a target that picks them as
// CouchDB does (couchOrder) or as PouchDB does.
func newWinnerLog(dbr *archive.DBReader, couchOrder bool) (*winnerLog, error) {
	f, err := os.CreateTemp("", "sofa-restore-winners-*")
	if err != nil {
		return nil, fmt.Errorf("temporary file: %w", err)
	}
	_ = os.Remove(f.Name()) // unlinked: nothing left behind, even by a killed run
	w := bufio.NewWriter(f)
	return &winnerLog{DBReader: dbr, f: f, w: w, enc: json.NewEncoder(w), couchOrder: couchOrder}, nil
}

// Changes passes the archive's changes after since on, noting the winner
// of every document of the archive, those before since included (a rerun
// resuming from a checkpoint still compares every document). The leaves
// of one document may come in two Changes (a chunk boundary): a document
// is noted once its last one has passed. Leaves of one document further
// apart in the archive (other documents between them) are noted apart,
// once per run of records: notWinning settles them.
func (l *winnerLog) Changes(ctx context.Context, since replicate.Seq, fn func(replicate.Change) error) error {
	var after int64
	if s := since.String(); s != "" && s != "0" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("archive: since %q is not a seq of this archive", s)
		}
		after = n
	}
	var id string
	var best *replicate.Doc
	note := func() {
		if best != nil && l.err == nil {
			l.err = l.enc.Encode(noted{id, best.Rev, best.Deleted, l.step})
		}
		best = nil
	}
	err := l.DBReader.Changes(ctx, nil, func(ch replicate.Change) error {
		if ch.ID != id {
			note()
			id = ch.ID
		}
		for _, d := range ch.Docs {
			if best == nil || wins(d, best, l.couchOrder) {
				best = d
			}
		}
		if n, err := strconv.ParseInt(ch.Seq.String(), 10, 64); err == nil && n <= after {
			return nil // copied by an earlier run
		}
		return fn(ch)
	})
	note()
	return err
}

// noted is one line of the winner log: the best leaf of a run of records
// of one document, and the step of the chain it came from, as a JSON
// array [id, rev, deleted, step].
type noted struct {
	ID      string
	Rev     string
	Deleted bool
	Step    int
}

func (n noted) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{n.ID, n.Rev, n.Deleted, n.Step})
}

func (n *noted) UnmarshalJSON(b []byte) error {
	a := [4]any{&n.ID, &n.Rev, &n.Deleted, &n.Step}
	return json.Unmarshal(b, &a)
}

// notWinning reads the noted winners back in batches and asks the target
// for its winners: kept counts the documents whose winner on the target
// is not the archive's, missing those the target does not have at all
// (purged there, or deleted and purged, after an earlier restore whose
// checkpoint this one resumed from), both with ids in skip (already
// reported failed) aside; total the documents compared.
//
// A document noted more than once (its leaves apart in the archive, or
// in several archives of a chain: the latest step's notes count) has
// at most one note that names its winner: the others differ from the
// target's winner and so come back as suspects. Only suspects (few) are
// held in memory: a second pass over the log finds each one's best leaf
// over all its notes, and counts its notes, so that it is compared and
// counted once.
func (l *winnerLog) notWinning(ctx context.Context, t replicate.Target, skip map[string]bool) (kept, missing, total int64, err error) {
	tdb, ok := t.(winnersReader)
	if !ok {
		return 0, 0, 0, errors.New("the target cannot tell its winning revisions")
	}
	if l.err == nil {
		l.err = l.w.Flush()
	}
	if l.err != nil {
		return 0, 0, 0, fmt.Errorf("temporary file: %w", l.err)
	}
	const batch = 500
	want := make(map[string]string, batch)
	suspects := map[string]string{} // id -> the target's winner
	check := func() error {
		if len(want) == 0 {
			return nil
		}
		ids := make([]string, 0, len(want))
		for id := range want {
			ids = append(ids, id)
		}
		got, err := tdb.Winners(ctx, ids)
		if err != nil {
			return err
		}
		for id, rev := range want {
			total++
			if got[id] != rev {
				suspects[id] = got[id]
			}
		}
		clear(want)
		return nil
	}
	err = l.each(skip, func(n noted) error {
		if _, ok := want[n.ID]; ok {
			// noted twice in one batch: compare and count once
			if err := check(); err != nil {
				return err
			}
		}
		want[n.ID] = n.Rev
		if len(want) >= batch {
			return check()
		}
		return nil
	})
	if err == nil {
		err = check()
	}
	if err != nil || len(suspects) == 0 {
		return 0, 0, total, err
	}
	best := make(map[string]noted, len(suspects))
	notes := make(map[string]int64, len(suspects))
	last := make(map[string][]noted, len(suspects)) // the notes of the latest step
	err = l.each(skip, func(n noted) error {
		if _, ok := suspects[n.ID]; !ok {
			return nil
		}
		notes[n.ID]++
		b, seen := best[n.ID]
		if !seen || n.Step > b.Step {
			last[n.ID] = nil
		}
		last[n.ID] = append(last[n.ID], n)
		if !seen || n.Step > b.Step || n.Step == b.Step && wins(&replicate.Doc{Rev: n.Rev, Deleted: n.Deleted}, &replicate.Doc{Rev: b.Rev, Deleted: b.Deleted}, l.couchOrder) {
			best[n.ID] = n
		}
		return nil
	})
	if err != nil {
		return 0, 0, 0, err
	}
	for id, rev := range suspects {
		total -= notes[id] - 1
		switch {
		case best[id].Rev == rev:
		case rev == "":
			missing++
		default:
			if w, ok := settle(ctx, t, id, last[id], l.couchOrder); ok && w == rev {
				continue
			}
			kept++
		}
	}
	return kept, missing, total, nil
}

// ancestryReader is a database that tells the ancestors of revisions
// (couch.DB.Ancestry).
type ancestryReader interface {
	Ancestry(ctx context.Context, id string, revs []string) (map[string][]string, error)
}

// settle finds the winner of a document noted more than once in one step
// from the revision tree its notes make: a noted revision that is an
// ancestor of another is no leaf (a document changed while it was backed
// up is stored twice, at the revision read first and at its later one;
// one deleted then is stored live, then as a tombstone whose parent is
// that revision), and the best of the others wins. The ancestries are
// the target's (where the restore wrote those revisions), one request
// for the document. ok is false when they cannot be told.
func settle(ctx context.Context, t replicate.Target, id string, ns []noted, couchOrder bool) (string, bool) {
	ar, ok := t.(ancestryReader)
	if !ok || len(ns) < 2 {
		return "", false
	}
	revs := make([]string, len(ns))
	for i, n := range ns {
		revs[i] = n.Rev
	}
	anc, err := ar.Ancestry(ctx, id, revs)
	if err != nil {
		return "", false
	}
	below := map[string]bool{}
	for _, as := range anc {
		for _, a := range as {
			below[a] = true
		}
	}
	var win *replicate.Doc
	for _, n := range ns {
		if _, known := anc[n.Rev]; !known {
			return "", false
		}
		if d := (&replicate.Doc{Rev: n.Rev, Deleted: n.Deleted}); !below[n.Rev] && (win == nil || wins(d, win, couchOrder)) {
			win = d
		}
	}
	if win == nil {
		return "", false
	}
	return win.Rev, true
}

// each calls fn for every note of the log in order, ids in skip aside.
func (l *winnerLog) each(skip map[string]bool, fn func(noted) error) error {
	if _, err := l.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("temporary file: %w", err)
	}
	dec := json.NewDecoder(bufio.NewReader(l.f))
	for {
		var n noted
		if err := dec.Decode(&n); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("temporary file: %w", err)
		}
		if skip[n.ID] {
			continue
		}
		if err := fn(n); err != nil {
			return err
		}
	}
}

// winnersReader is a database that tells the winning revision of
// documents (couch.DB.Winners).
type winnersReader interface {
	Winners(ctx context.Context, ids []string) (map[string]string, error)
}

// Close closes the temporary file (unlinked when created).
func (l *winnerLog) Close() { l.f.Close() }

// wins reports whether leaf a beats leaf b by CouchDB's rule for the
// winning revision: a live leaf beats a deleted one, then the longer
// history (higher generation), then the greater revision id.
func wins(a, b *replicate.Doc, couchOrder bool) bool {
	if a.Deleted != b.Deleted {
		return !a.Deleted
	}
	ga, ia := splitRev(a.Rev)
	gb, ib := splitRev(b.Rev)
	if ga != gb {
		return ga > gb
	}
	if couchOrder {
		return bytes.Compare(revIDKey(ia), revIDKey(ib)) > 0
	}
	return ia > ib
}

// revIDKey is how CouchDB orders a revision id: one of 32 hex digits as
// the 16 bytes it spells, any other as its own bytes (Erlang binaries,
// compared byte by byte).
func revIDKey(id string) []byte {
	if len(id) == 32 {
		if b, err := hex.DecodeString(id); err == nil {
			return b
		}
	}
	return []byte(id)
}

// splitRev splits "N-hash" into N and hash (0 and rev when malformed).
func splitRev(rev string) (int, string) {
	n, id, ok := strings.Cut(rev, "-")
	if !ok {
		return 0, rev
	}
	gen, err := strconv.Atoi(n)
	if err != nil {
		return 0, rev
	}
	return gen, id
}
