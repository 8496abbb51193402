package archive

import (
	"encoding/json"
	"time"

	"github.com/sofadb/sofa/replicate"
)

// FormatName and FormatVersion identify the archive format in its header
// member. Writers write FormatVersion (3: a database's small members packed
// into pack members, see docs/archive-format.md) unless Options.Version
// asks for 2 (version 1 plus index.json and footer.json after the
// manifest); a reader accepts MinFormatVersion to FormatVersion, and
// refuses a later one with ErrVersion.
const (
	FormatName       = "sofa-archive"
	FormatVersion    = 3
	MinFormatVersion = 1
	// tocVersion is the version of index.json and footer.json, unchanged
	// since archive format version 2 introduced them.
	tocVersion = 2
)

// Header is the first member of an archive (header.json, uncompressed).
type Header struct {
	Format      string      `json:"format"`         // FormatName
	Version     int         `json:"version"`        // 1 to FormatVersion
	Tool        string      `json:"tool,omitempty"` // "sofa v1.2.3": what wrote it
	Created     time.Time   `json:"created"`        // UTC, second precision
	Compression Compression `json:"compression"`    // codec of doc chunks and blobs
	// ID is 128 random bits in hex, naming this archive in a chain.
	ID string `json:"id"`
	// Since is nil for a full backup; for an incremental one it names the
	// previous archive of the chain and the state each database had in it.
	Since *Since `json:"since,omitempty"`
	// Source identifies the server backed up: its uuid (`GET /`) when it
	// gives one, else its URL without credentials; "" when unknown. An
	// incremental backup is only taken against the server of its chain.
	Source string `json:"source,omitempty"`
	// Shard is set when the archive is one member of a sharded backup
	// (a set of Count archives, see Shard); nil otherwise. Readers that
	// predate it ignore it.
	Shard *Shard `json:"shard,omitempty"`
}

// Shard says which member of a sharded backup an archive is: it holds
// the databases whose name hashes to Index of Count (see sofa.ShardOf).
// SetID is the caller's name of the run that wrote the set ("" when
// none was given): every member of one set carries the same.
type Shard struct {
	Index int    `json:"index"`
	Count int    `json:"count"`
	SetID string `json:"set_id,omitempty"`
}

// Since links an incremental archive to the archive it continues.
type Since struct {
	ArchiveID string `json:"archive_id"`
	// Source is the previous archive's Header.Source.
	Source    string             `json:"source,omitempty"`
	Databases map[string]DBState `json:"databases"` // by database name
}

// DBState is where a database's backup in an archive ended: the source seq
// reached and the checkpoint documents written, so that a later
// incremental backup starts from there.
type DBState struct {
	// Seq is the source seq every change up to which is in the archive
	// (the checkpoint's source_last_seq); nil if none was recorded.
	Seq replicate.Seq
	// InstanceStart is the source database's instance_start_time at backup
	// time; when it differs now, the database was recreated and an
	// incremental backup of it must start from scratch.
	InstanceStart string
	// Checkpoints are the `_local` checkpoint bodies the engine wrote to
	// the archive, by id (without the "_local/" prefix).
	Checkpoints map[string]json.RawMessage
}

type dbStateJSON struct {
	Seq           json.RawMessage            `json:"seq,omitempty"`
	InstanceStart string                     `json:"instance_start_time,omitempty"`
	Checkpoints   map[string]json.RawMessage `json:"checkpoints,omitempty"`
}

// MarshalJSON writes Seq as raw JSON.
func (s DBState) MarshalJSON() ([]byte, error) {
	return json.Marshal(dbStateJSON{Seq: rawSeq(s.Seq), InstanceStart: s.InstanceStart, Checkpoints: s.Checkpoints})
}

// UnmarshalJSON reads Seq as raw JSON.
func (s *DBState) UnmarshalJSON(b []byte) error {
	var w dbStateJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = DBState{Seq: seqOf(w.Seq), InstanceStart: w.InstanceStart, Checkpoints: w.Checkpoints}
	return nil
}

// DBSummary describes one database group of an archive, as listed by
// `sofa ls` and recorded in the manifest.
type DBSummary struct {
	Name string // database name
	Dir  string // directory of its members: db/<Dir>/...
	// DocCount and DelCount are the source's doc_count and doc_del_count
	// when the backup started (0 when unknown).
	DocCount, DelCount int64
	// DelCountUnknown: the source did not report doc_del_count (PouchDB
	// Server); DelCount is 0. Archives written before this field say
	// nothing (false).
	DelCountUnknown bool
	// Revisions counts the revisions stored (records): every leaf, and
	// for a document changed while the backup ran also the revision read
	// before the change (the later record's history holds it; a restore
	// or verify takes only the leaves of the tree the records make).
	Revisions     int64
	Tombstones    int64 // of which deleted (records)
	Attachments   int64 // attachment references in revisions
	Blobs         int64 // distinct attachment blobs first stored in this group
	Chunks        int   // doc chunk members
	DocBytes      int64 // uncompressed bytes of the doc chunks
	BlobBytes     int64 // uncompressed bytes of this group's blobs
	StoredBytes   int64 // bytes of the group's meta, chunk and blob members as stored
	Seq           replicate.Seq
	InstanceStart string
	// Since is the seq this database's incremental backup started from;
	// nil for a full backup of the database.
	Since       replicate.Seq
	Checkpoints map[string]json.RawMessage
	Metadata    replicate.Metadata
	// Error is non-empty when the backup of this database failed part way
	// (DBWriter.Abort): the revisions present are kept, Seq is the last
	// checkpoint reached.
	Error string
}

type dbSummaryJSON struct {
	Name          string                     `json:"name"`
	Dir           string                     `json:"dir"`
	DocCount      int64                      `json:"doc_count"`
	DelCount      int64                      `json:"doc_del_count"`
	DelUnknown    bool                       `json:"doc_del_count_unknown,omitempty"`
	Revisions     int64                      `json:"revisions"`
	Tombstones    int64                      `json:"tombstones"`
	Attachments   int64                      `json:"attachments"`
	Blobs         int64                      `json:"blobs"`
	Chunks        int                        `json:"chunks"`
	DocBytes      int64                      `json:"doc_bytes"`
	BlobBytes     int64                      `json:"blob_bytes"`
	StoredBytes   int64                      `json:"stored_bytes"`
	Seq           json.RawMessage            `json:"seq,omitempty"`
	InstanceStart string                     `json:"instance_start_time,omitempty"`
	Since         json.RawMessage            `json:"since,omitempty"`
	Checkpoints   map[string]json.RawMessage `json:"checkpoints,omitempty"`
	Metadata      metadataJSON               `json:"metadata"`
	Error         string                     `json:"error,omitempty"`
}

// MarshalJSON writes seqs and the security object as raw JSON.
func (s DBSummary) MarshalJSON() ([]byte, error) {
	return json.Marshal(dbSummaryJSON{
		Name: s.Name, Dir: s.Dir, DocCount: s.DocCount, DelCount: s.DelCount, DelUnknown: s.DelCountUnknown,
		Revisions: s.Revisions, Tombstones: s.Tombstones, Attachments: s.Attachments,
		Blobs: s.Blobs, Chunks: s.Chunks, DocBytes: s.DocBytes, BlobBytes: s.BlobBytes,
		StoredBytes: s.StoredBytes, Seq: rawSeq(s.Seq), InstanceStart: s.InstanceStart,
		Since: rawSeq(s.Since), Checkpoints: s.Checkpoints, Metadata: metaToJSON(s.Metadata),
		Error: s.Error,
	})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *DBSummary) UnmarshalJSON(b []byte) error {
	var w dbSummaryJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = DBSummary{
		Name: w.Name, Dir: w.Dir, DocCount: w.DocCount, DelCount: w.DelCount, DelCountUnknown: w.DelUnknown,
		Revisions: w.Revisions, Tombstones: w.Tombstones, Attachments: w.Attachments,
		Blobs: w.Blobs, Chunks: w.Chunks, DocBytes: w.DocBytes, BlobBytes: w.BlobBytes,
		StoredBytes: w.StoredBytes, Seq: seqOf(w.Seq), InstanceStart: w.InstanceStart,
		Since: seqOf(w.Since), Checkpoints: w.Checkpoints, Metadata: metaFromJSON(w.Metadata),
		Error: w.Error,
	}
	return nil
}

// metadataJSON is replicate.Metadata on the wire, security kept raw.
type metadataJSON struct {
	Security    json.RawMessage `json:"security,omitempty"`
	RevsLimit   int             `json:"revs_limit,omitempty"`
	Partitioned bool            `json:"partitioned,omitempty"`
}

func metaToJSON(m replicate.Metadata) metadataJSON {
	var sec json.RawMessage
	if len(m.Security) > 0 && json.Valid(m.Security) {
		sec = json.RawMessage(m.Security)
	}
	return metadataJSON{Security: sec, RevsLimit: m.RevsLimit, Partitioned: m.Partitioned}
}

// metaEmpty: m says nothing (an end.json whose metadata is meta.json's).
func metaEmpty(m replicate.Metadata) bool {
	return len(m.Security) == 0 && m.RevsLimit == 0 && !m.Partitioned
}

func metaFromJSON(m metadataJSON) replicate.Metadata {
	var sec []byte
	if len(m.Security) > 0 && string(m.Security) != "null" {
		sec = []byte(m.Security)
	}
	return replicate.Metadata{Security: sec, RevsLimit: m.RevsLimit, Partitioned: m.Partitioned}
}

// dbMeta is a group's first member, db/<dir>/meta.json.
type dbMeta struct {
	Name     string `json:"name"`
	DocCount int64  `json:"doc_count"`
	DelCount int64  `json:"doc_del_count"`
	// DelCountUnknown: the source did not report doc_del_count (PouchDB
	// Server); DelCount is 0 and means nothing.
	DelCountUnknown bool            `json:"doc_del_count_unknown,omitempty"`
	UpdateSeq       json.RawMessage `json:"update_seq,omitempty"`
	InstanceStart   string          `json:"instance_start_time,omitempty"`
	Since           json.RawMessage `json:"since,omitempty"`
	Metadata        metadataJSON    `json:"metadata"`
}

// Manifest is the last member (manifest.json, uncompressed). Its members
// list names every member before it, in order, with sizes and checksums.
type Manifest struct {
	Format    string      `json:"format"`
	Version   int         `json:"version"`
	ID        string      `json:"id"` // the header's ID
	Databases []DBSummary `json:"databases"`
	Totals    Totals      `json:"totals"`
	// Members is not kept in memory when reading: readers compare it
	// against the members seen as it streams by.
	Members []MemberInfo `json:"members,omitempty"`
}

// Totals sums the whole archive.
type Totals struct {
	Databases   int   `json:"databases"`
	Members     int64 `json:"members"`      // members before the manifest
	Revisions   int64 `json:"revisions"`    // revisions stored (records), see DBSummary
	Blobs       int64 `json:"blobs"`        // distinct attachment blobs
	StoredBytes int64 `json:"stored_bytes"` // member bytes as stored, headers excluded
	RawBytes    int64 `json:"raw_bytes"`    // member bytes uncompressed
}

// MemberInfo is one member: its name, its size and SHA-256 as stored in
// the tar, and its size and SHA-256 uncompressed.
type MemberInfo struct {
	Name      string `json:"name"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
	RawSize   int64  `json:"raw_size"`
	RawSHA256 string `json:"raw_sha256"`
}

// PAX record keys carried by every member's tar header (besides the
// manifest, which carries only paxSHA256).
const (
	paxSHA256    = "SOFA.sha256"     // hex SHA-256 of the stored bytes
	paxRawSHA256 = "SOFA.raw_sha256" // hex SHA-256 of the uncompressed bytes
	paxRawSize   = "SOFA.raw_size"   // decimal uncompressed size
)

func rawSeq(s replicate.Seq) json.RawMessage {
	if len(s) == 0 || !json.Valid(s) {
		return nil
	}
	return json.RawMessage(s)
}

func seqOf(r json.RawMessage) replicate.Seq {
	if len(r) == 0 || string(r) == "null" {
		return nil
	}
	return replicate.Seq(append([]byte(nil), r...))
}
