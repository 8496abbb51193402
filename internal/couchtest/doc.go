// Package couchtest runs real servers for tests (Apache CouchDB and PouchDB
// Server) and checks what they hold.
//
// It gives three things, all built on net/http only so that they stay
// independent of the project's own CouchDB client:
//
//   - StartServer, Start and Shared launch a server of the run's kind
//     (RunKind, chosen by SOFA_TEST_SERVER): a single-node CouchDB from the
//     release in ../shared/couchdb (SOFA_COUCHDB_RELEASE), each in its own
//     temp directory on a free loopback port, or a CouchDB named by
//     SOFA_COUCHDB_URL; or `pouchdb-server --in-memory` from the
//     repository's node_modules (run `make deps` first); and stop it again;
//   - Client holds small setup helpers (create databases, write documents
//     with or without new_edits, set _security, create users, make a
//     database read-only);
//   - CompareDBs and AssertEqual are an equality oracle implementing
//     "Equal": same ids, same leaf revisions per document, same winner and
//     deleted state, canonical-JSON-equal bodies and histories, same
//     attachment bytes and metadata, and optionally the same _security and
//     _revs_limit.
//
// # What PouchDB Server 4.2 enforces
//
// Observed on pouchdb-server 4.2.0 (express-pouchdb, in-memory adapter):
//
//   - Without an admin the server is in "admin party": every request is
//     allowed.
//   - Once an admin exists (Options.AdminUser), wrong credentials on any
//     request are answered 401 {"error":"unauthorized"}; _config and
//     database creation need the admin.
//   - A database without _security stays readable and writable by anyone,
//     anonymous included. With _security members set, anonymous requests
//     and users outside members get 401; members can read and write
//     documents but not design documents.
//   - Members may still write _local documents, even when a
//     validate_doc_update function rejects their document writes (as in
//     CouchDB). A read-only user is therefore made of members plus such a
//     function (Client.MakeReadOnly); a source that refuses _local writes
//     must be simulated with the fault proxy.
//   - BUG: a PUT /{db} (database creation) by an anonymous or non-admin user
//     on a server that has an admin crashes the whole server process
//     ("db.info is not a function"). Tests must never do that; Server.Err
//     and the failure reported at Cleanup make such a crash visible.
//   - There is no _revs_limit route (404), no multipart, and request lines
//     or headers over 16 KB are refused.
package couchtest
