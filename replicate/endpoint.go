package replicate

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Seq is an opaque changes-feed sequence exactly as the source sent it, as
// raw JSON: `42` (PouchDB Server, CouchDB 1.x) or `"12-g1AAAA..."` (CouchDB
// 2.x+). Seqs are echoed back verbatim and never compared. A nil or empty Seq
// means "from the beginning" (since=0).
type Seq []byte

// String returns the seq as it goes into a `since=` query parameter: a JSON
// string is unquoted, anything else is its JSON text.
func (s Seq) String() string {
	if len(s) == 0 {
		return "0"
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return unquote(s)
	}
	return string(s)
}

// Change is one row of `_changes?style=all_docs`.
type Change struct {
	Seq     Seq      // row seq; may be nil when the source batches seqs (seq_interval)
	ID      string   // document id
	Revs    []string // every leaf revision of the document, deleted leaves included
	Deleted bool     // the winning revision is a tombstone
	// Docs, when non-nil, holds the leaf revisions already read, with their
	// attachment bytes (an archive source delivers documents with the feed).
	// The engine then skips fetching and writes the revisions the target
	// lacks from here.
	Docs []*Doc
}

// Missing is one entry of a `_revs_diff` answer: the revisions the target
// lacks and the target leaves that may be their ancestors.
type Missing struct {
	Missing           []string `json:"missing"`
	PossibleAncestors []string `json:"possible_ancestors,omitempty"`
}

// RevRequest asks a source for one revision of one document, with its
// `_revisions` history. AttsSince lists revisions the target already holds
// (possible ancestors): attachments unchanged since them need not travel.
type RevRequest struct {
	ID        string
	Rev       string
	AttsSince []string
}

// DocError names one revision that could not be read or written, and why,
// in CouchDB's terms (error "forbidden", reason "..." from the server).
type DocError struct {
	ID     string `json:"id"`
	Rev    string `json:"rev"`
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// String is the failure on one line: id, rev, error and reason, the
// error and reason folded by OneLine (a server may give a multi-line
// Erlang term as reason).
func (e DocError) String() string {
	return e.ID + " " + e.Rev + ": " + OneLine(e.Error, MaxReasonBytes) + ": " + OneLine(e.Reason, MaxReasonBytes)
}

// MaxReasonBytes is where OneLine cuts a server's error or reason for
// output (the whole text stays in DocError).
const MaxReasonBytes = 300

// OneLine returns s with every run of white space (newlines included)
// folded into one space and, when longer than max bytes, cut at a rune
// boundary before max with "...(N bytes)" saying its whole length.
func OneLine(s string, max int) string {
	f := strings.Join(strings.Fields(s), " ")
	if len(f) <= max {
		return f
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(f[cut]) {
		cut--
	}
	return f[:cut] + "...(" + strconv.Itoa(len(f)) + " bytes)"
}

// Metadata is the per-database state that replication itself never carries.
type Metadata struct {
	// Security is the raw `_security` object; nil when unknown or unsupported.
	Security []byte `json:"security,omitempty"`
	// RevsLimit is `_revs_limit`; 0 means unknown (server has no such route).
	RevsLimit int `json:"revs_limit,omitempty"`
	// Partitioned is props.partitioned from `GET /db` (CouchDB 3.0+).
	Partitioned bool `json:"partitioned,omitempty"`
}

// DBInfo is what `GET /db` says about a database that the engine needs.
type DBInfo struct {
	Name     string // db_name
	DocCount int64  // doc_count (live documents)
	DelCount int64  // doc_del_count
	// DelCountUnknown says the server did not report doc_del_count
	// (PouchDB Server): DelCount is then 0 and means nothing. Counts a
	// side does not report are never compared.
	DelCountUnknown bool
	UpdateSeq       Seq // update_seq, for progress only
	// InstanceStart is instance_start_time; "0" or "" means unknown. A change
	// between runs means the database was deleted and recreated (CouchDB
	// 3.3+, PouchDB Server restart).
	InstanceStart string
	// Partitioned is props.partitioned (CouchDB 3.0+).
	Partitioned bool
	// Bytes is sizes.external: the uncompressed bytes of the documents
	// and their attachments (CouchDB 2.0+); 0 when the server does not
	// say (PouchDB Server). The engine sizes its batches with it.
	Bytes int64
	// Identity is a stable string naming this database for the replication
	// id: the server uuid (or URL without credentials) plus the db name.
	Identity string
}

// ErrNotFound is returned by GetLocal when the `_local` document does not
// exist, and by Info when the database does not exist.
var ErrNotFound = errors.New("not found")

// ErrReadOnly is returned by PutLocal when the endpoint refuses `_local`
// writes (read-only credentials or a source that must never be written).
var ErrReadOnly = errors.New("read-only endpoint")

// ErrDenied is matched (errors.Is) by an endpoint's error when the
// server refused a request for lack of rights: wrong credentials, or a
// user without access to the database (CouchDB: HTTP 401 or 403 for the
// whole request, not a document's refusal). Retrying does not help: a
// continuous run stops on it rather than try again (and lock the account
// on a server that locks it after failed logins).
var ErrDenied = errors.New("access denied")

// ErrUnreadable is wrapped by Source methods when one revision (or one of
// its attachments) cannot be read while the source itself is fine (gone
// meanwhile, a name too long for any URL): the engine reports that
// revision with its id, rev and reason, and goes on with the others.
var ErrUnreadable = errors.New("revision unreadable")

// ErrBatchRejected is wrapped by WriteDocs when the server refused a whole
// request because of its content (HTTP 413 too large, 400 bad request):
// splitting the batch can isolate the offending revisions. RevsDiff wraps
// it when the server refused the whole request for one of its documents
// (a DocRefusal): the engine splits the request to find which.
var ErrBatchRejected = errors.New("batch rejected")

// DocRefusal is implemented by an error (found with errors.As) that is a
// server's refusal of a whole request for what one of its documents is,
// not for the request's form: CouchDB answers `_revs_diff` and
// `_bulk_docs` on a partitioned database with one 400 illegal_docid when
// any id lacks a partition. ok says the error is such a refusal; name and
// reason are the server's words, which the engine records for each
// revision it finds refused (splitting the request until it does).
type DocRefusal interface {
	DocRefusal() (name, reason string, ok bool)
}

// docRefused returns the server's words when err is a refusal of a whole
// request for one of its documents (ErrBatchRejected and a DocRefusal).
func docRefused(err error) (name, reason string, ok bool) {
	var dr DocRefusal
	if !errors.Is(err, ErrBatchRejected) || !errors.As(err, &dr) {
		return "", "", false
	}
	return dr.DocRefusal()
}

// ErrFinalCheckpoint is wrapped, beside the context's error, by the
// error of a run interrupted whose last checkpoint could not be written
// (the target did not answer in time): a rerun resumes from the
// checkpoint before it.
var ErrFinalCheckpoint = errors.New("the final checkpoint could not be written")

// WarnCheckpointHeld is the warning of a run some of whose revisions
// were not copied: its last checkpoint stays before the first of them.
const WarnCheckpointHeld = "the checkpoint stays before the first revision not copied, so the next run tries those revisions again"

// WarnTombstoneAttachments is the warning of a run that copied a deleted
// revision with attachments to a target that keeps none on a deleted
// revision (TombstoneAttachmentsDropper).
const WarnTombstoneAttachments = "the target keeps no attachments of deleted revisions (PouchDB Server): the attachments of the tombstones copied are not on it"

// TombstoneAttachmentsDropper is an optional Target ability: a target
// that stores a deleted revision without its attachments (PouchDB
// Server) says so, and a run that copies such a revision warns
// (WarnTombstoneAttachments) instead of calling the copy whole in
// silence.
type TombstoneAttachmentsDropper interface {
	DropsTombstoneAttachments() bool
}

// ErrMetadataRefused is wrapped by Target.SetMetadata when the target
// permanently refuses a database property: the account is not an admin of
// the database, or the server lets nobody write it (CouchDB's
// `_users/_security`). The engine reports it as a warning and copies the
// documents.
var ErrMetadataRefused = errors.New("metadata refused by the target")

// ErrUnreachable is wrapped by an endpoint's error when its server gave
// no answer at all (connection refused or reset, no response in time) on
// every attempt of a request within the retry budget: the server is taken
// as lost. A many-database copy or restore then starts no further
// database (fleet.Options.StopWhenLost) rather than trying each one for
// the whole budget.
var ErrUnreachable = errors.New("server unreachable")

// ErrMissingStub is wrapped (with ErrBatchRejected) by WriteDocs when the
// server refused a whole request because a revision named, as a stub, an
// attachment it lacks (CouchDB: 412 missing_stub). A clustered CouchDB
// may have stored part of the request before refusing it, so the batch is
// split to learn, revision by revision, what was written; a revision
// refused alone is written again with all its attachment bytes.
var ErrMissingStub = errors.New("missing_stub")

// Endpoint is what sources and targets have in common.
type Endpoint interface {
	// Info reads the database's state. ErrNotFound if it does not exist.
	Info(ctx context.Context) (DBInfo, error)
	// GetLocal reads `_local/<id>` as raw JSON; ErrNotFound if absent.
	GetLocal(ctx context.Context, id string) ([]byte, error)
	// PutLocal writes `_local/<id>` (body is a JSON object, `_rev` included
	// when updating). ErrReadOnly if the endpoint refuses. Idempotent.
	PutLocal(ctx context.Context, id string, body []byte) error
}

// Source is where documents are read from.
type Source interface {
	Endpoint
	// Changes streams `_changes?style=all_docs` from since (exclusive),
	// calling fn for every row in order until the feed ends. An error from fn
	// stops the feed and is returned. Implementations resume from the last
	// row delivered when a connection fails, so fn never sees a gap (it may
	// see a row twice).
	Changes(ctx context.Context, since Seq, fn func(Change) error) error
	// FetchRevs reads the requested revisions with `_revisions`, `latest`
	// semantics (a request for a non-leaf may yield its newer leaves too) and
	// attachment stubs: every attachment has Stub=false and Data=nil unless
	// the source delivered its bytes with the document. Per-revision read
	// failures are returned as DocErrors; error is for the whole request.
	FetchRevs(ctx context.Context, reqs []RevRequest) ([]*Doc, []DocError, error)
	// Attachment reads one attachment of one revision in its stored
	// encoding: the bytes whose md5 is att.Digest. It fills att.Data (and
	// att.Encoding when the source says so).
	Attachment(ctx context.Context, docID, rev string, att *Attachment) error
	// Metadata reads `_security`, `_revs_limit` and db properties.
	Metadata(ctx context.Context) (Metadata, error)
}

// Target is where documents are written.
type Target interface {
	Endpoint
	// RevsDiff asks which of the given leaf revisions the target lacks
	// (per the CouchDB replication protocol, `POST /db/_revs_diff`). Ids with
	// nothing missing are absent from the answer.
	RevsDiff(ctx context.Context, revs map[string][]string) (map[string]Missing, error)
	// WriteDocs stores revisions as they are (`new_edits=false`): writes are
	// idempotent, so a retry after a lost answer is safe. Rejected revisions
	// come back as DocErrors; error means nothing can be said about the
	// batch (it may be retried whole or split).
	WriteDocs(ctx context.Context, docs []*Doc) ([]DocError, error)
	// SetMetadata applies database metadata. Phase "before" is called
	// before any document is written (`_revs_limit`), "after" once all
	// documents are written (`_security`).
	SetMetadata(ctx context.Context, m Metadata, phase MetadataPhase) error
}

// MetadataPhase says when SetMetadata is called.
type MetadataPhase int

const (
	// BeforeDocs: create-time properties and `_revs_limit`.
	BeforeDocs MetadataPhase = iota
	// AfterDocs: `_security`.
	AfterDocs
)

// StartSeqSetter is an optional Target interface: the engine tells the
// target the seq it starts copying from (nil: from the beginning) once it
// has judged the checkpoints, before anything is written.
type StartSeqSetter interface {
	SetStartSeq(since Seq)
}

// LocalDiffer is an optional Target interface: its RevsDiff answers
// without a request (an archive being written knows the revisions it
// stored), so the engine asks it for every batch instead of skipping
// `_revs_diff` on an initial copy. A revision the source sends again (a
// CouchDB cluster's feed replaying the shard ranges of a lost node) is
// then neither read nor written nor counted twice.
type LocalDiffer interface {
	LocalRevsDiff()
}

// Pacer is an optional Target interface: the engine calls Pace before it
// starts each batch and before each fetch (_bulk_get) within one, and
// waits while Pace does. A target that cannot take more for now (an
// archive database that may not write to the archive's stream yet and
// has spooled its share) first calls release, which writes what the
// worker holds (so that it waits holding none of the in-flight budget),
// then returns once it can take more, or ctx.Err().
type Pacer interface {
	Pace(ctx context.Context, release func() error) error
}

// LocalDoc is a `_local` document as read: ID without the `_local/`
// prefix, Body the raw JSON.
type LocalDoc struct {
	ID   string
	Body []byte
}

// LocalRevver is an optional Endpoint interface: the `_rev` a successful
// PutLocal gave the document, so a checkpoint update needs no re-read.
type LocalRevver interface {
	LocalRev(id string) (rev string, ok bool)
}

// AttachmentOpener is an optional Source ability: one attachment's stored
// bytes as a stream (the caller closes it), for attachments too large to
// hold. The bytes are those whose md5 is att.Digest.
type AttachmentOpener interface {
	OpenAttachment(ctx context.Context, docID, rev string, att *Attachment) (io.ReadCloser, error)
}

// AttachmentBatchReader is an optional Source ability: the bytes of small
// identity-encoded attachments of many revisions in one request (on
// CouchDB one `_bulk_get` with attachments inline), where reading each
// with its own request would cost the source more than its bytes. For
// each AttRead it sets Data of the listed attachments it could read and
// checked against their md5 digests; what it leaves nil is read one at a
// time (Source.Attachment), which also reports what cannot be read. It
// returns an error only when ctx ends.
type AttachmentBatchReader interface {
	ReadAttachments(ctx context.Context, revs []AttRead) error
}

// AttRead names attachments of one revision to read (AttachmentBatchReader).
type AttRead struct {
	ID, Rev string
	Atts    []*Attachment
}

// StreamWriter is an optional Target ability: write one revision whose
// attachments marked Stream are piped from open while the request is
// sent (opened again if the request is retried). CanStream says whether
// an attachment can go that way (a target that must re-encode bytes
// cannot take them raw).
type StreamWriter interface {
	CanStream(att *Attachment) bool
	WriteStreamed(ctx context.Context, doc *Doc, open func(*Attachment) (io.ReadCloser, error)) (*DocError, error)
}

// StubChecker is an optional Target ability: what the engine needs to
// send an attachment as a stub (its bytes left out) only where the
// target holds those bytes. An attachment's revpos alone does not say
// so: CouchDB gives an attachment put on a document recreated after its
// deletion revpos 1 (its revision 3-z over 2-y, deleted, over 1-x), and
// a target holding 1-x, whose attachment of that name holds the old
// bytes, fills a stub from there. A target without this ability is sent
// every attachment's bytes.
type StubChecker interface {
	// FillsStubsByName says whether the target fills a stub from the
	// nearest ancestor of the revision it holds a body of, by the
	// attachment's name and revpos, whatever digest the stub names
	// (CouchDB): the engine then reads that ancestor back (ReadHeld) and
	// sends as a stub only an attachment held there with the same digest
	// and revpos. A target that finds a stub's bytes by the digest the
	// stub names, and refuses a stub whose digest it lacks (PouchDB
	// Server: 412 missing_stub), says false: an attachment introduced at
	// or below an ancestor it holds (revpos) goes as a stub unchecked.
	FillsStubsByName() bool
	// ReadHeld reads revisions the target holds, with `_revisions` and
	// attachment stubs (name, revpos, digest; no bytes), as
	// Source.FetchRevs reads them. A revision it does not hold, or no
	// longer as a leaf, may be missing from the answer or answered with
	// its newer leaves; the engine matches the answer by revision.
	ReadHeld(ctx context.Context, reqs []RevRequest) ([]*Doc, error)
}
