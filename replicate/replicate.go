// Package replicate copies the leaf revisions of one source database to one
// target database over the CouchDB replication protocol: changes feed ->
// batches -> _revs_diff -> fetch (_bulk_get) -> write (_bulk_docs with
// new_edits=false) -> checkpoint. It sees its endpoints only through the
// Source and Target interfaces, which the CouchDB HTTP client (package couch)
// and the archive reader and writer (package archive) implement, so backup,
// restore and db-to-db replication share this one engine.
package replicate
