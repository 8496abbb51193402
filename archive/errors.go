package archive

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinel errors. Errors returned by this package wrap one of them in an
// *Error that names the member concerned, so callers test with errors.Is.
var (
	// ErrChecksum is returned when a member's bytes do not match the
	// SHA-256 recorded for them (in its tar header or in the manifest).
	ErrChecksum = errors.New("checksum mismatch")
	// ErrTruncated is returned when the archive ends before its manifest
	// and tar trailer, or inside a member.
	ErrTruncated = errors.New("truncated archive")
	// ErrVersion is returned for an archive whose header names a format or
	// a major version this package does not read.
	ErrVersion = errors.New("unsupported format version")
	// ErrUnsafeName is returned for a member whose name is not one this
	// format generates: absolute, containing "..", or of unexpected shape.
	// Such an archive is refused before anything is extracted.
	ErrUnsafeName = errors.New("unsafe or unexpected member name")
	// ErrTooLarge is returned when a member is, or decompresses to, more
	// than its declared size or the reader's hard cap (decompression bomb).
	ErrTooLarge = errors.New("member too large")
	// ErrFormat is returned for a member whose content is malformed, or a
	// member that is out of place (tar type, order, missing fields).
	ErrFormat = errors.New("malformed archive")
	// ErrMissingBlob is returned when a revision refers to an attachment
	// whose bytes (a blob member) did not precede it.
	ErrMissingBlob = errors.New("attachment blob missing")
	// ErrManifest is returned when the manifest disagrees with the members
	// actually read (counts, sizes, checksums, databases).
	ErrManifest = errors.New("manifest mismatch")
	// ErrChain is returned by CheckChain for archives that do not form a
	// chain full, incremental, incremental... in order.
	ErrChain = errors.New("archives do not form a chain")
	// ErrClosed is returned by writer methods called after Close.
	ErrClosed = errors.New("archive closed")
	// ErrNoFeed is returned by DBReader.FetchRevs and DBReader.Attachment:
	// an archive delivers documents with its changes feed (Change.Docs).
	ErrNoFeed = errors.New("archive source delivers documents with the feed")
)

// Error is an error about one member of an archive. Member is the member's
// name in the tar stream ("" when the error concerns the archive as a
// whole); Err wraps one of the sentinel errors above, possibly with detail.
type Error struct {
	Member string
	Err    error
}

func (e *Error) Error() string {
	if e.Member == "" {
		return "archive: " + e.Err.Error()
	}
	return "archive: member " + strconv.Quote(e.Member) + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// memberErr builds an *Error for member wrapping sentinel with detail.
func memberErr(member string, sentinel error, detail string) error {
	if detail == "" {
		return &Error{Member: member, Err: sentinel}
	}
	return &Error{Member: member, Err: &detailErr{sentinel: sentinel, detail: detail}}
}

// detailErr is a sentinel plus a human detail: "checksum mismatch: want
// ..., got ...". errors.Is finds the sentinel.
type detailErr struct {
	sentinel error
	detail   string
}

func (d *detailErr) Error() string { return d.sentinel.Error() + ": " + d.detail }
func (d *detailErr) Unwrap() error { return d.sentinel }

// GroupDir returns the member directory of the database group whose
// member err names (its meta.json, a doc chunk, its end.json, a pack, or
// a member inside a pack), "" when err names none. DirName maps a
// database name to its directory.
func GroupDir(err error) string {
	var e *Error
	if !errors.As(err, &e) {
		return ""
	}
	name, _, _ := strings.Cut(e.Member, " (") // a pack's member: the pack
	p, perr := parseName(name)
	if perr != nil || p.kind == kindBlob {
		return ""
	}
	return p.dir
}

// DirName returns the member directory of database name in an archive
// (db/<dir>/...: see docs/archive-format.md). A directory of the bytes
// [a-z0-9_-] alone is the name itself.
func DirName(name string) string { return dbDir(name) }
