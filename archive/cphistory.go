package archive

import "encoding/json"

// newestHistory is a checkpoint body with its `history` cut to the newest
// session (the first entry), or body itself when it has at most one or
// is not an object with a history array.
//
// An archive's checkpoints are written while the source is read-only
// (target-only checkpoints), and such a checkpoint is resumed from its
// source_last_seq alone: the sessions before are never compared with a
// source's. Kept whole, the history grew by one session per archive of
// a chain (a checkpoint is carried into the next incremental, its
// header's since and its manifest), up to the replicator's 50 entries of
// about 700 bytes each on CouchDB, per database, twice per archive.
func newestHistory(body []byte) []byte {
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return body
	}
	var hist []json.RawMessage
	if json.Unmarshal(doc["history"], &hist) != nil || len(hist) <= 1 {
		return body
	}
	b, err := json.Marshal(hist[:1])
	if err != nil {
		return body
	}
	doc["history"] = b
	out, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	return out
}

// withNewestHistory is a copy of s whose checkpoints keep their newest
// history entry only (see newestHistory); nil for nil. An archive
// written before the cut carries whole histories into the header of the
// incremental that continues it.
func (s *Since) withNewestHistory() *Since {
	if s == nil {
		return nil
	}
	out := *s
	out.Databases = make(map[string]DBState, len(s.Databases))
	for name, st := range s.Databases {
		if len(st.Checkpoints) > 0 {
			cps := make(map[string]json.RawMessage, len(st.Checkpoints))
			for id, body := range st.Checkpoints {
				cps[id] = newestHistory(body)
			}
			st.Checkpoints = cps
		}
		out.Databases[name] = st
	}
	return &out
}
