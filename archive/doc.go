// Package archive reads and writes sofa's backup archive: one file (or
// stream) holding, per database, every leaf revision with `_revisions`,
// tombstones, bodies byte for byte, attachments in their stored encoding
// (each distinct one stored once, keyed by SHA-256), and the database's
// metadata and seq reached. The format is specified in
// docs/archive-format.md.
//
// An archive is a POSIX (PAX) tar stream of independently compressed
// members, written in one pass to any io.Writer and read in one pass from
// any io.Reader, so `tar tf` lists it and stdin/stdout work.
//
// Writing (backup): NewWriter, then Writer.Database per database; the
// returned *DBWriter is a replicate.Target the engine copies into. Many
// databases may be written at once. Writer.Close writes the manifest.
//
// Reading (restore): NewReader, then Reader.Next per database until
// io.EOF; the returned *DBReader is a replicate.Source whose Changes
// delivers revisions with their attachment bytes (Change.Docs).
//
// Checking: Verify reads and checks everything; List reads the header and
// manifest only (`sofa ls`); ReadSince and CheckChain support
// incremental backups.
//
// Every error about archive content is an *Error naming the member and
// wrapping a sentinel (ErrChecksum, ErrTruncated, ErrVersion,
// ErrUnsafeName, ErrTooLarge, ErrFormat, ErrMissingBlob, ErrManifest).
// Nothing read from a member is delivered before the member's checksums
// have been verified.
package archive
