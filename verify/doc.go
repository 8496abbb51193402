// Package verify compares two databases for equality (the same document
// ids, leaf revisions, bodies and attachments, as the modes below detail),
// through the replicate.Source interface, so a CouchDB database, a PouchDB
// Server database and an archive compare alike.
//
// Compare has two modes:
//
//   - Cheap reads `GET /db` (doc_count, doc_del_count) and the whole
//     `_changes?style=all_docs` feed of both sides: the same document ids,
//     per id the same set of leaf revisions and the same deleted state of
//     the winner.
//   - Full adds, per leaf revision both sides hold, a fetch of the revision
//     (with attachment stubs, never attachment bytes) from each side: the
//     same deleted flag, the same body as canonical JSON (RFC 8785: keys
//     sorted, strings and numbers re-encoded, so 1.50 equals 1.5 and
//     servers that re-serialize compare equal), the same revision history
//     where both keep it, and per attachment the same digest, content_type,
//     length and revpos. Equal leaves with equal deleted flags give the
//     same winner (CouchDB's rule depends on nothing else).
//
// Options.Metadata adds `_security` (sections and their names and roles
// compared as sets) and `_revs_limit` (where both sides know it).
//
// Memory: one entry per document id of the first database (its leaf
// revisions), filled from a's feed; b's feed is compared row by row
// against it. Full mode holds one batch of revisions per side at a time.
package verify
