package archive

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// finish reads the manifest member (streamed, never held whole), checks
// its checksum, compares it with every member and database read, and
// checks that nothing follows it.
func (r *Reader) finish(m *member) error {
	man, listed, err := r.readManifest(m.name, m.p.codec, m.sum, m.rawSum)
	if err != nil {
		return err
	}
	if man.Format != FormatName || man.Version != r.hdr.Version {
		return memberErr(m.name, ErrVersion, fmt.Sprintf("format %q version %d", man.Format, man.Version))
	}
	if man.ID != r.hdr.ID {
		return memberErr(m.name, ErrManifest, "archive id differs from the header's")
	}
	if listed.count != r.members || !bytes.Equal(listed.sum.Sum(nil), r.seen.Sum(nil)) {
		return memberErr(m.name, ErrManifest, fmt.Sprintf("lists %d members that differ from the %d members read", listed.count, r.members))
	}
	t := man.Totals
	if t.Members != r.members || t.Databases != len(r.summaries) || t.Revisions != r.revisions ||
		t.Blobs != r.blobMembers || t.StoredBytes != r.storedBytes || t.RawBytes != r.rawBytes {
		return memberErr(m.name, ErrManifest, "totals differ from the members read")
	}
	if len(man.Databases) != len(r.summaries) {
		return memberErr(m.name, ErrManifest, fmt.Sprintf("lists %d databases, archive holds %d", len(man.Databases), len(r.summaries)))
	}
	byDir := make(map[string]DBSummary, len(man.Databases))
	for i, s := range man.Databases {
		if got, ok := r.summaries[s.Dir]; !ok || !sameEndMember(got, s) {
			return memberErr(m.name, ErrManifest, fmt.Sprintf("database %q differs from its end member", s.Name))
		}
		if i > 0 && man.Databases[i-1].Name >= s.Name {
			return memberErr(m.name, ErrManifest, "databases not sorted by name")
		}
		if !seqCheckpointed(s) {
			return memberErr(m.name, ErrManifest, fmt.Sprintf("database %q: no checkpoint is at its seq (the next --since starts from a checkpoint)", s.Name))
		}
		byDir[s.Dir] = s
	}
	// the index must hold the manifest's summaries (checkpoints too,
	// which end members leave out)
	return r.readEnd(byDir)
}

// readEnd reads what follows the manifest: the index and footer (version
// 2), whose databases must agree with dbs (by Dir: those read, or the
// manifest's), the tar trailer, and what is past it (checkTail).
func (r *Reader) readEnd(dbs map[string]DBSummary) error {
	if r.hdr.Version >= 2 {
		if err := r.readIndexMembers(dbs); err != nil {
			return err
		}
	}
	if _, err := r.tr.Next(); !errors.Is(err, io.EOF) {
		if err != nil {
			return r.tarErr(err)
		}
		return &Error{Err: &detailErr{ErrFormat, "member after " + manifestName}}
	}
	return r.checkTail()
}

// sameEnd reports whether the summary s a manifest or an index gives of a
// database agrees with got, its end member's.
func sameEnd(got, s DBSummary) bool {
	return got.Name == s.Name && got.Revisions == s.Revisions && got.Chunks == s.Chunks && got.Blobs == s.Blobs &&
		bytes.Equal(got.Seq, s.Seq) && got.Error == s.Error
}

// sameEndMember reports whether the manifest's summary s of a database
// says what its end member got says, in every field the end member
// holds: all but the checkpoints (left out of it), and the metadata,
// meta.json's where end.json leaves it out (not compared when unknown:
// a scan at offsets reads no meta.json).
func sameEndMember(got, s DBSummary) bool {
	return sameEnd(got, s) && got.Dir == s.Dir && got.DocCount == s.DocCount && got.DelCount == s.DelCount &&
		got.DelCountUnknown == s.DelCountUnknown && got.Tombstones == s.Tombstones && got.Attachments == s.Attachments &&
		got.DocBytes == s.DocBytes && got.BlobBytes == s.BlobBytes && got.StoredBytes == s.StoredBytes &&
		got.InstanceStart == s.InstanceStart && bytes.Equal(got.Since, s.Since) &&
		(metaEmpty(got.Metadata) || bytes.Equal(jsonOf(metaToJSON(got.Metadata)), jsonOf(metaToJSON(s.Metadata))))
}

// seqCheckpointed reports whether a summary's seq is the source_last_seq
// of one of its checkpoints, as the writer makes it (the seq is the last
// checkpoint's), or it has no checkpoints or no seq: a checkpoint that
// says another seq would make the next --since skip changes or read
// them again.
func seqCheckpointed(s DBSummary) bool {
	if len(s.Checkpoints) == 0 || len(s.Seq) == 0 {
		return true
	}
	var want bytes.Buffer
	if json.Compact(&want, s.Seq) != nil {
		return false
	}
	for _, cp := range s.Checkpoints {
		var c struct {
			SourceLastSeq json.RawMessage `json:"source_last_seq"`
		}
		var got bytes.Buffer
		if json.Unmarshal(cp, &c) == nil && json.Compact(&got, c.SourceLastSeq) == nil && bytes.Equal(got.Bytes(), want.Bytes()) {
			return true
		}
	}
	return false
}

// memberList is the manifest's member list folded as it streams: a count
// and the same rolling hash the reader keeps of members read.
type memberList struct {
	count int64
	sum   hash.Hash
}

// parseManifest decodes a manifest, folding its member list instead of
// keeping it.
func parseManifest(rd io.Reader) (Manifest, memberList, error) {
	var man Manifest
	list := memberList{sum: sha256.New()}
	dec := jsontext.NewDecoder(rd)
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return man, list, errors.New("manifest is not a JSON object")
	}
	for dec.PeekKind() != '}' {
		kt, err := dec.ReadToken()
		if err != nil {
			return man, list, err
		}
		key := kt.String()
		if key != "members" {
			v, err := dec.ReadValue()
			if err != nil {
				return man, list, err
			}
			var dst any
			switch key {
			case "format":
				dst = &man.Format
			case "version":
				dst = &man.Version
			case "id":
				dst = &man.ID
			case "databases":
				dst = &man.Databases
			case "totals":
				dst = &man.Totals
			default:
				continue
			}
			if err := json.Unmarshal(v, dst); err != nil {
				return man, list, fmt.Errorf("%s: %w", key, err)
			}
			continue
		}
		if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
			return man, list, errors.New("members is not an array")
		}
		for dec.PeekKind() != ']' {
			v, err := dec.ReadValue()
			if err != nil {
				return man, list, err
			}
			var e MemberInfo
			if err := json.Unmarshal(v, &e); err != nil {
				return man, list, fmt.Errorf("members: %w", err)
			}
			fmt.Fprintf(list.sum, "%s\x00%d\x00%s\x00%d\x00%s\n", e.Name, e.Size, e.SHA256, e.RawSize, e.RawSHA256)
			list.count++
		}
		if _, err := dec.ReadToken(); err != nil {
			return man, list, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return man, list, err
	}
	return man, list, nil
}

func checkStoredSum(name string, h hash.Hash, want string) error {
	if hex.EncodeToString(h.Sum(nil)) != want {
		return memberErr(name, ErrChecksum, "bytes do not match the SHA-256 in its tar header")
	}
	return nil
}

// readIndexMembers reads and checks the members a version 2 archive has
// after its manifest: index.json (its archive id, and its databases those
// of dbs) and footer.json (pointing at it, FooterSize bytes).
func (r *Reader) readIndexMembers(dbs map[string]DBSummary) error {
	members := r.members
	defer func() { r.members = members }() // they are not the manifest's
	im, err := r.readMember()
	if errors.Is(err, io.EOF) {
		return &Error{Err: &detailErr{ErrTruncated, "archive ends after " + manifestName + " without its index"}}
	}
	if err != nil {
		return err
	}
	if im.p.kind != kindIndex {
		return memberErr(im.name, ErrFormat, "member after "+manifestName+" is not "+indexName)
	}
	idx, err := parseIndex(im.raw, r.hdr.ID)
	if err != nil {
		return err
	}
	// what ls and a restore at offsets read: the databases as read
	if len(idx.Databases) != len(dbs) {
		return memberErr(im.name, ErrManifest, fmt.Sprintf("lists %d databases, archive holds %d", len(idx.Databases), len(dbs)))
	}
	for _, d := range idx.Databases {
		if got, ok := dbs[d.Summary.Dir]; !ok || !sameSummary(got, d.Summary) {
			return memberErr(im.name, ErrManifest, fmt.Sprintf("database %q differs from the manifest's", d.Summary.Name))
		}
	}
	// what a reader at offsets reads: the header's copy, and where it
	// finds each member (when this read saw them all)
	if hj, ij := jsonOf(r.hdr), jsonOf(idx.Header); !bytes.Equal(hj, ij) {
		return memberErr(im.name, ErrManifest, "its copy of the header differs from "+headerName)
	}
	if r.sp != nil {
		if err := r.sp.check(idx); err != nil {
			return memberErr(im.name, ErrManifest, err.Error())
		}
	}
	fm, err := r.readMember()
	if errors.Is(err, io.EOF) {
		return &Error{Err: &detailErr{ErrTruncated, "archive ends after " + indexName + " without its footer"}}
	}
	if err != nil {
		return err
	}
	if fm.p.kind != kindFooter || len(fm.raw) != FooterSize {
		return memberErr(fm.name, ErrFormat, fmt.Sprintf("member after %s is not a %d-byte %s", indexName, FooterSize, footerName))
	}
	var f footer
	if err := json.Unmarshal(bytes.TrimRight(fm.raw, " \n"), &f); err != nil || f.Format != FooterFormat {
		return memberErr(fm.name, ErrFormat, "not a footer")
	}
	if f.Version != tocVersion {
		return memberErr(fm.name, ErrVersion, fmt.Sprintf("footer version %d", f.Version))
	}
	if f.ID != r.hdr.ID || f.IndexRawSize != int64(len(im.raw)) || f.IndexSHA256 != im.sum {
		return memberErr(fm.name, ErrManifest, "the footer does not point at this archive's index")
	}
	if r.sp != nil && (f.IndexOffset != r.sp.indexAt || f.IndexSize != r.sp.indexSize) {
		return memberErr(fm.name, ErrManifest, fmt.Sprintf("the footer places the index at %d+%d, the archive has it at %d+%d",
			f.IndexOffset, f.IndexSize, r.sp.indexAt, r.sp.indexSize))
	}
	return nil
}

// jsonOf is v as JSON (nil when it cannot be encoded).
func jsonOf(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
