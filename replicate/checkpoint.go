package replicate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// maxHistory is how many sessions a checkpoint keeps, as CouchDB does.
const maxHistory = 50

// checkpointDoc is the `_local/<replication id>` document, in CouchDB's
// replicator format (session_id, source_last_seq, history newest first)
// plus sofa's instance fields used to detect a recreated database.
type checkpointDoc struct {
	ID             string          `json:"_id"`
	Rev            string          `json:"_rev,omitempty"`
	SessionID      string          `json:"session_id"`
	SourceLastSeq  json.RawMessage `json:"source_last_seq"`
	Version        int             `json:"replication_id_version"`
	Replicator     string          `json:"replicator"`
	SourceInstance string          `json:"sofa_source_instance,omitempty"`
	TargetInstance string          `json:"sofa_target_instance,omitempty"`
	// TargetOnly marks a checkpoint written while the source refused
	// `_local` writes; only such a checkpoint is trusted without a
	// matching one on the source.
	TargetOnly bool `json:"sofa_target_only,omitempty"`
	// Anchor is one revision the source held when the replication started
	// from the beginning (its first change whose id is at most
	// maxAnchorID bytes, so that a target's max_document_size never
	// refuses the checkpoint for it). If the source no longer knows
	// it, the source database was deleted and recreated: its seqs start
	// over, so the checkpoint means nothing (PouchDB Server and CouchDB
	// 2.x-3.2 keep instance_start_time across a recreation).
	Anchor *anchor `json:"sofa_anchor,omitempty"`
	// Tail is a revision the source held at SourceLastSeq: the last of
	// the changes the checkpoint covers. A database recreated with the
	// same first document (the same revision id: PouchDB's are
	// deterministic) and written to beyond the old update_seq keeps
	// the anchor and passes the seq check, but lacks the tail.
	Tail    *anchor        `json:"sofa_tail,omitempty"`
	History []historyEntry `json:"history"`
}

// maxAnchorID bounds the id of an anchor revision, in bytes.
const maxAnchorID = 200

type anchor struct {
	ID  string `json:"id"`
	Rev string `json:"rev"`
}

type historyEntry struct {
	SessionID        string          `json:"session_id"`
	StartTime        string          `json:"start_time"`
	EndTime          string          `json:"end_time"`
	StartLastSeq     json.RawMessage `json:"start_last_seq"`
	EndLastSeq       json.RawMessage `json:"end_last_seq"`
	RecordedSeq      json.RawMessage `json:"recorded_seq"`
	MissingChecked   int64           `json:"missing_checked"`
	MissingFound     int64           `json:"missing_found"`
	DocsRead         int64           `json:"docs_read"`
	DocsWritten      int64           `json:"docs_written"`
	DocWriteFailures int64           `json:"doc_write_failures"`
}

func newSessionID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func readCheckpoint(ctx context.Context, e Endpoint, id string) (*checkpointDoc, error) {
	b, err := e.GetLocal(ctx, "_local/"+id)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseCheckpoint(b), nil
}

// parseCheckpoint reads a checkpoint's body; nil when it is not one (an
// unreadable checkpoint is ignored: starting over is always correct).
func parseCheckpoint(b []byte) *checkpointDoc {
	var d checkpointDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil
	}
	return &d
}

// compareCheckpoints picks the start seq from the source and target
// checkpoints as CouchDB's replicator does: the same session on both
// sides gives source_last_seq; otherwise the newest session found in both
// histories gives its recorded_seq; otherwise nil (start over).
func compareCheckpoints(src, tgt *checkpointDoc) Seq {
	if src == nil || tgt == nil {
		return nil
	}
	if src.SessionID != "" && src.SessionID == tgt.SessionID {
		return Seq(src.SourceLastSeq)
	}
	sh, th := src.History, tgt.History
	for len(sh) > 0 && len(th) > 0 {
		for _, t := range th {
			if t.SessionID == sh[0].SessionID {
				return Seq(sh[0].RecordedSeq)
			}
		}
		for _, s := range sh[1:] {
			if s.SessionID == th[0].SessionID {
				return Seq(th[0].RecordedSeq)
			}
		}
		sh, th = sh[1:], th[1:]
	}
	return nil
}

// checkpointer writes checkpoints for one session.
type checkpointer struct {
	mu        sync.Mutex // held by run.checkpoint around a write
	id        string
	session   string
	startTime time.Time
	startSeq  Seq
	source    Source
	target    Target
	srcLog    *checkpointDoc
	tgtLog    *checkpointDoc
	srcOff    bool // source refused _local writes: target-only checkpoints
	srcInst   string
	tgtInst   string
	warn      func(string)
	lastSeq   Seq
	written   int
	anchorMu  sync.Mutex
	anchor    *anchor
	tail      *anchor // of the last checkpoint written (under anchorMu)
}

// setAnchor records the anchor once (the first change of a replication
// that started from the beginning).
func (c *checkpointer) setAnchor(a *anchor) {
	c.anchorMu.Lock()
	if c.anchor == nil {
		c.anchor = a
	}
	c.anchorMu.Unlock()
}

func (c *checkpointer) getAnchor() *anchor {
	c.anchorMu.Lock()
	defer c.anchorMu.Unlock()
	return c.anchor
}

// setTail records the tail of the checkpoint at hand (written, or read
// at the start).
func (c *checkpointer) setTail(a *anchor) {
	c.anchorMu.Lock()
	c.tail = a
	c.anchorMu.Unlock()
}

func (c *checkpointer) getTail() *anchor {
	c.anchorMu.Lock()
	defer c.anchorMu.Unlock()
	return c.tail
}

// write records seq as reached by this session, with stats, on the
// source (unless it refused once) and then the target.
func (c *checkpointer) write(ctx context.Context, seq Seq, tail *anchor, st Stats) error {
	if len(seq) == 0 {
		return nil
	}
	if tail != nil {
		c.setTail(tail)
	}
	entry := c.entry(seq, st)
	if !c.srcOff {
		doc, err := c.put(ctx, c.source, c.srcLog, seq, entry)
		switch {
		case errors.Is(err, ErrReadOnly):
			c.srcOff = true
			if c.warn != nil {
				c.warn("source refuses _local writes (read-only credentials?): checkpointing on the target only")
			}
		case err != nil:
			return fmt.Errorf("write checkpoint on source: %w", err)
		default:
			c.srcLog = doc
		}
	}
	doc, err := c.put(ctx, c.target, c.tgtLog, seq, entry)
	if err != nil {
		return fmt.Errorf("write checkpoint on target: %w", err)
	}
	c.tgtLog = doc
	c.lastSeq = seq
	c.written++
	return nil
}

// doc is the checkpoint at seq that follows prev (nil: none).
func (c *checkpointer) doc(prev *checkpointDoc, seq Seq, entry historyEntry) *checkpointDoc {
	doc := &checkpointDoc{ID: "_local/" + c.id, SessionID: c.session, SourceLastSeq: rawSeq(seq),
		Version: 1, Replicator: "sofa", SourceInstance: c.srcInst, TargetInstance: c.tgtInst, TargetOnly: c.srcOff,
		Anchor: c.getAnchor(), Tail: c.getTail()}
	var hist []historyEntry
	if prev != nil {
		doc.Rev = prev.Rev
		hist = prev.History
		if len(hist) > 0 && hist[0].SessionID == c.session {
			hist = hist[1:]
		}
	}
	doc.History = append([]historyEntry{entry}, hist...)
	if len(doc.History) > maxHistory {
		doc.History = doc.History[:maxHistory]
	}
	return doc
}

// entry is this session's history entry for a checkpoint at seq.
func (c *checkpointer) entry(seq Seq, st Stats) historyEntry {
	return historyEntry{
		SessionID: c.session, StartTime: c.startTime.UTC().Format(time.RFC1123),
		EndTime:      time.Now().UTC().Format(time.RFC1123),
		StartLastSeq: rawSeq(c.startSeq), EndLastSeq: rawSeq(seq), RecordedSeq: rawSeq(seq),
		MissingChecked: st.MissingChecked, MissingFound: st.MissingFound, DocsRead: st.DocsRead,
		DocsWritten: st.DocsWritten, DocWriteFailures: st.DocWriteFailures,
	}
}

func (c *checkpointer) put(ctx context.Context, e Endpoint, prev *checkpointDoc, seq Seq, entry historyEntry) (*checkpointDoc, error) {
	doc := c.doc(prev, seq, entry)
	for attempt := 0; ; attempt++ {
		body, _ := json.Marshal(doc)
		err := e.PutLocal(ctx, doc.ID, body)
		if err == nil {
			if lr, ok := e.(LocalRevver); ok {
				if rev, ok := lr.LocalRev(doc.ID); ok {
					doc.Rev = rev
					return doc, nil
				}
			}
			// re-read to learn the new _rev
			cur, rerr := readCheckpoint(ctx, e, c.id)
			if rerr != nil || cur == nil {
				return doc, rerr
			}
			return cur, nil
		}
		if attempt > 0 || errors.Is(err, ErrReadOnly) {
			return nil, err
		}
		// Conflict or lost answer: adopt the stored _rev and try once more.
		cur, rerr := readCheckpoint(ctx, e, c.id)
		if rerr != nil {
			return nil, err
		}
		if cur == nil {
			doc.Rev = ""
		} else {
			doc.Rev = cur.Rev
		}
	}
}

func rawSeq(s Seq) json.RawMessage {
	if len(s) == 0 {
		return json.RawMessage("0")
	}
	return json.RawMessage(s)
}
