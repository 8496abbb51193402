package archive

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sofadb/sofa/replicate"
)

// DBReader is one database of an archive being read. It implements
// replicate.Source: Changes streams the database's revisions in archive
// order, one Change per run of revisions of the same document, with Docs
// filled and every attachment's Data set. Seqs are record ordinals within
// the database (1, 2, ...), so a restore can resume with since. FetchRevs
// and Attachment return ErrNoFeed; PutLocal returns ErrReadOnly.
//
// A DBReader is valid until the next call of Reader.Next and is not safe
// for concurrent use.
type DBReader struct {
	r      *Reader
	dir    string
	meta   dbMeta
	used   bool
	done   bool
	end    *DBSummary
	ord    int64 // records read so far
	chunks int
	// tombstones and atts count the records read that are deleted, and
	// their attachment references (end.json says both)
	tombstones, atts int64
	// release frees the private reader of a group opened by Index.OpenDB.
	release func()
	// ahead, when not nil, delivers the member after meta.json, read by
	// its own goroutine from the moment Index.OpenDB returned (see
	// readAhead); run takes it before reading on.
	ahead chan readResult
}

// readResult is a member read ahead, or the error reading it gave.
type readResult struct {
	m   *member
	err error
}

// readAhead reads the group's next member (its first blob or doc chunk)
// on a goroutine of its own: a restore prepares the target database
// (creates it, claims it) meanwhile, and its first write does not wait
// for the first chunk's read, checksums and decompression. The DBReader
// touches its Reader only once the member is taken (nextMember) or the
// read waited for (Close).
func (d *DBReader) readAhead() {
	ch := make(chan readResult, 1)
	d.ahead = ch
	go func() {
		m, err := d.r.readMember()
		ch <- readResult{m, err}
	}()
}

// nextMember returns the member read ahead, if any, else reads one.
func (d *DBReader) nextMember() (*member, error) {
	if d.ahead != nil {
		res := <-d.ahead
		d.ahead = nil
		return res.m, res.err
	}
	return d.r.readMember()
}

// Close releases what a DBReader of Index.OpenDB holds (its blob spill
// file); a DBReader of Reader.Next needs none (Reader.Close does it).
func (d *DBReader) Close() error {
	if d.ahead != nil {
		<-d.ahead // the read ahead ends before its Reader is closed
		d.ahead = nil
	}
	if d.release != nil {
		d.release()
		d.release = nil
	}
	return nil
}

// blob returns the bytes of the blob sum, fetching it at its offset when
// it is in an earlier group of an indexed archive, or was not kept
// (ReaderOptions.RefetchBlobs); ok false: no blob.
func (d *DBReader) blob(sum [32]byte) ([]byte, bool, error) {
	data, ok, err := d.r.blobs.get(sum)
	if ok || err != nil || d.r.fetch == nil {
		return data, ok, err
	}
	data, err = d.r.fetch(sum)
	if err != nil || data == nil {
		return nil, false, err
	}
	if err := d.r.blobs.put(sum, data); err != nil {
		return nil, false, err
	}
	return data, true, nil
}

var _ replicate.Source = (*DBReader)(nil)

func (r *Reader) startDB(m *member) (*DBReader, error) {
	var meta dbMeta
	if err := json.Unmarshal(m.raw, &meta); err != nil {
		return nil, memberErr(m.name, ErrFormat, err.Error())
	}
	if dbDir(meta.Name) != m.p.dir {
		return nil, memberErr(m.name, ErrFormat, fmt.Sprintf("database name %q does not belong in directory %q", meta.Name, m.p.dir))
	}
	if r.dirs[m.p.dir] {
		return nil, memberErr(m.name, ErrFormat, "database appears twice")
	}
	if sh := r.hdr.Shard; sh != nil && (sh.Count < 1 || ShardOf(meta.Name, sh.Count) != sh.Index) {
		// a member of a sharded set holds its shard's databases only:
		// one elsewhere is a database twice in the set, or misplaced
		return nil, memberErr(m.name, ErrFormat, fmt.Sprintf("database %q belongs to shard %d of %d, not to this member's %d",
			meta.Name, ShardOf(meta.Name, max(sh.Count, 1)), sh.Count, sh.Index))
	}
	r.dirs[m.p.dir] = true
	return &DBReader{r: r, dir: m.p.dir, meta: meta}, nil
}

// Name returns the database name.
func (d *DBReader) Name() string { return d.meta.Name }

// Since returns the seq this database's incremental backup started from;
// nil when the archive holds a full backup of it.
func (d *DBReader) Since() replicate.Seq { return seqOf(d.meta.Since) }

// Summary returns the database's end-member summary (counts, seq reached,
// Error for an aborted backup); ok is false until the changes feed (or
// Reader.Next) has read the whole group.
func (d *DBReader) Summary() (s DBSummary, ok bool) {
	if d.end == nil {
		return DBSummary{}, false
	}
	return *d.end, true
}

// Info returns the source database's state recorded at backup time,
// Partitioned as Metadata says. Identity is
// "sofa-archive:<archive id>/<name>".
func (d *DBReader) Info(ctx context.Context) (replicate.DBInfo, error) {
	m, _ := d.Metadata(ctx)
	return replicate.DBInfo{
		Name: d.meta.Name, DocCount: d.meta.DocCount, DelCount: d.meta.DelCount, DelCountUnknown: d.meta.DelCountUnknown,
		UpdateSeq: seqOf(d.meta.UpdateSeq), InstanceStart: d.meta.InstanceStart, Partitioned: m.Partitioned,
		Identity: "sofa-archive:" + d.r.hdr.ID + "/" + d.meta.Name,
	}, nil
}

// GetLocal always returns replicate.ErrNotFound: an archive keeps no
// `_local` documents of its own.
func (d *DBReader) GetLocal(ctx context.Context, id string) ([]byte, error) {
	return nil, replicate.ErrNotFound
}

// PutLocal returns replicate.ErrReadOnly.
func (d *DBReader) PutLocal(ctx context.Context, id string, body []byte) error {
	return replicate.ErrReadOnly
}

// FetchRevs returns ErrNoFeed: revisions arrive in Change.Docs.
func (d *DBReader) FetchRevs(ctx context.Context, reqs []replicate.RevRequest) ([]*replicate.Doc, []replicate.DocError, error) {
	return nil, nil, &Error{Err: ErrNoFeed}
}

// Attachment returns ErrNoFeed: attachment bytes arrive in Change.Docs.
func (d *DBReader) Attachment(ctx context.Context, docID, rev string, att *replicate.Attachment) error {
	return &Error{Err: ErrNoFeed}
}

// Metadata returns the metadata recorded at backup time: from the end
// member once the group has been read (it carries what the engine set
// after the documents), else from the meta member.
func (d *DBReader) Metadata(ctx context.Context) (replicate.Metadata, error) {
	if d.end != nil {
		m := d.end.Metadata
		if m.Security != nil || m.RevsLimit != 0 || m.Partitioned {
			return m, nil
		}
	}
	return metaFromJSON(d.meta.Metadata), nil
}

// Changes streams the database's revisions after since (an ordinal seq
// from an earlier run over the same archive, or empty), calling fn for
// every Change in order. It returns nil at the database's end member, an
// error from fn as is, and an *Error naming the member on damage. It can
// be called once per database: the archive is read as a stream.
func (d *DBReader) Changes(ctx context.Context, since replicate.Seq, fn func(replicate.Change) error) error {
	if d.used {
		return fmt.Errorf("archive: changes of %q already read (an archive is read once, in order)", d.meta.Name)
	}
	d.used = true
	var after int64
	if s := since.String(); s != "" && s != "0" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("archive: since %q is not a seq of this archive", s)
		}
		after = n
	}
	return d.run(ctx, after, fn)
}

// drain reads the rest of the group without delivering anything.
func (d *DBReader) drain() error {
	d.used = true
	return d.run(context.Background(), 0, nil)
}

// run reads members up to the group's end member; fn nil checks only.
func (d *DBReader) run(ctx context.Context, after int64, fn func(replicate.Change) error) error {
	r := d.r
	for !d.done {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, err := d.nextMember()
		if err == io.EOF {
			return r.fail(&Error{Err: &detailErr{ErrTruncated, fmt.Sprintf("archive ends after member %q inside database %q", r.last, d.meta.Name)}})
		}
		if err != nil {
			return err
		}
		if (m.p.kind == kindChunk || m.p.kind == kindEnd) && m.p.dir != d.dir {
			return r.fail(memberErr(m.name, ErrFormat, fmt.Sprintf("member of another database inside the group of %q", d.meta.Name)))
		}
		switch m.p.kind {
		case kindBlob:
			if err := r.blobs.put(m.p.sum, m.raw); err != nil {
				return r.fail(err)
			}
			if r.sp != nil {
				r.sp.stored(m.p.sum, d.dir)
			}
		case kindChunk:
			d.chunks++
			if m.p.chunk != d.chunks {
				return r.fail(memberErr(m.name, ErrFormat, fmt.Sprintf("chunk %d of database %q: chunks are numbered from 1 in order", d.chunks, d.meta.Name)))
			}
			if err := d.chunk(m, after, fn); err != nil {
				return err
			}
		case kindEnd:
			if err := d.finish(m); err != nil {
				return r.fail(err)
			}
		default:
			return r.fail(memberErr(m.name, ErrFormat, fmt.Sprintf("database %q has no end member", d.meta.Name)))
		}
	}
	return nil
}

// chunk decodes one doc chunk and delivers its Changes.
func (d *DBReader) chunk(m *member, after int64, fn func(replicate.Change) error) error {
	var pending *replicate.Change
	flush := func() error {
		if pending == nil {
			return nil
		}
		c := *pending
		pending = nil
		if fn == nil || d.ord <= after {
			return nil
		}
		c.Seq = replicate.Seq(strconv.AppendInt(nil, d.ord, 10))
		return fn(c)
	}
	var derr error  // a damage error found by the callback
	var cberr error // any error the callback returned
	err := decodeRecords(m.raw, func(doc *replicate.Doc, refs []attRef) error {
		cberr = d.record(m.name, doc, refs, after, fn, &pending, flush, &derr)
		return cberr
	})
	switch {
	case err == nil:
		return flush()
	case derr != nil:
		return d.r.fail(derr)
	case cberr != nil:
		return err // from fn, passed through unchanged
	default:
		return d.r.fail(memberErr(m.name, ErrFormat, err.Error()))
	}
}

// record adds one decoded revision to the pending Change, resolving its
// attachments' blobs, and flushes the pending Change first when the
// document changes.
func (d *DBReader) record(member string, doc *replicate.Doc, refs []attRef, after int64,
	fn func(replicate.Change) error, pending **replicate.Change, flush func() error, derr *error) error {
	if *pending != nil && (*pending).ID != doc.ID {
		if err := flush(); err != nil {
			return err
		}
	}
	d.ord++
	d.atts += int64(len(refs))
	if doc.Deleted {
		d.tombstones++
	}
	deliver := fn != nil && d.ord > after
	for _, ref := range refs {
		if d.r.sp != nil {
			d.r.sp.referred(ref.sum, d.dir)
		}
		if !deliver && (d.r.blobs.has(ref.sum) || d.r.fetch == nil) {
			n, ok := d.r.blobs.size(ref.sum)
			if !ok {
				*derr = missingBlob(member, doc, ref)
				return *derr
			}
			if *derr = blobFits(member, doc, ref, n); *derr != nil {
				return *derr
			}
			if *derr = d.digestFits(member, doc, ref, nil); *derr != nil {
				return *derr
			}
			continue
		}
		data, ok, err := d.blob(ref.sum)
		if err == nil && !ok {
			err = missingBlob(member, doc, ref)
		}
		if err == nil {
			err = blobFits(member, doc, ref, int64(len(data)))
		}
		if err == nil {
			err = d.digestFits(member, doc, ref, data)
		}
		if err != nil {
			*derr = err
			return err
		}
		if deliver {
			ref.att.Data = data
		}
	}
	if *pending == nil {
		*pending = &replicate.Change{ID: doc.ID, Deleted: true}
	}
	p := *pending
	p.Revs = append(p.Revs, doc.Rev)
	p.Docs = append(p.Docs, doc)
	p.Deleted = p.Deleted && doc.Deleted
	return nil
}

// blobFits checks a blob's size against the attachment that refers to
// it: its encoded_length when it has an encoding (the blob holds the
// encoded bytes), else its length, where the record gives them.
func blobFits(member string, doc *replicate.Doc, ref attRef, size int64) error {
	want := ref.att.Length
	if ref.att.Encoding != "" {
		want = ref.att.EncodedLength
	}
	if want <= 0 || size == want {
		return nil
	}
	return memberErr(member, ErrFormat, fmt.Sprintf("doc %q rev %s attachment %q is %d bytes as stored, its blob %s holds %d",
		shorten(doc.ID), doc.Rev, ref.att.Name, want, hex.EncodeToString(ref.sum[:]), size))
}

// digestFits checks, with ReaderOptions.CheckDigests, the attachment's
// md5 digest against its blob's bytes (data, or read from the blobs
// kept), once per blob and digest.
func (d *DBReader) digestFits(member string, doc *replicate.Doc, ref attRef, data []byte) error {
	b64, ok := strings.CutPrefix(ref.att.Digest, "md5-")
	if !d.r.opts.CheckDigests || !ok {
		return nil
	}
	key := digestKey{ref.sum, b64}
	if d.r.digests[key] {
		return nil
	}
	if data == nil {
		var err error
		if data, _, err = d.blob(ref.sum); err != nil {
			return err
		}
	}
	if m := md5.Sum(data); base64.StdEncoding.EncodeToString(m[:]) != b64 {
		return memberErr(member, ErrFormat, fmt.Sprintf("doc %q rev %s attachment %q says %s, its blob %s holds other bytes",
			shorten(doc.ID), doc.Rev, ref.att.Name, ref.att.Digest, hex.EncodeToString(ref.sum[:])))
	}
	if d.r.digests == nil {
		d.r.digests = map[digestKey]bool{}
	}
	d.r.digests[key] = true
	return nil
}

// digestKey is a blob and an md5 digest found to fit it.
type digestKey struct {
	sum [32]byte
	md5 string
}

func missingBlob(member string, doc *replicate.Doc, ref attRef) error {
	return memberErr(member, ErrMissingBlob, fmt.Sprintf("doc %q rev %s attachment %q needs blob %s, which no earlier member holds",
		shorten(doc.ID), doc.Rev, ref.att.Name, hex.EncodeToString(ref.sum[:])))
}

// shorten keeps error messages readable for 20,000-character ids.
func shorten(s string) string {
	if len(s) <= 120 {
		return s
	}
	return s[:100] + "..." + strconv.Itoa(len(s)) + " bytes"
}

// finish checks the end member against what the group held.
func (d *DBReader) finish(m *member) error {
	var s DBSummary
	if err := json.Unmarshal(m.raw, &s); err != nil {
		return memberErr(m.name, ErrFormat, err.Error())
	}
	if s.Name != d.meta.Name || s.Dir != d.dir {
		return memberErr(m.name, ErrFormat, fmt.Sprintf("end member names database %q, group is %q", s.Name, d.meta.Name))
	}
	if s.Revisions != d.ord || s.Chunks != d.chunks {
		return memberErr(m.name, ErrManifest, fmt.Sprintf("says %d revisions in %d chunks, group holds %d in %d", s.Revisions, s.Chunks, d.ord, d.chunks))
	}
	if s.Tombstones != d.tombstones || s.Attachments != d.atts {
		return memberErr(m.name, ErrManifest, fmt.Sprintf("says %d tombstones and %d attachment references, group holds %d and %d", s.Tombstones, s.Attachments, d.tombstones, d.atts))
	}
	if d.r.hdr.Version >= 3 {
		// its stored_bytes is 0 (it is inside the group's last pack):
		// the group's are what was read
		s.StoredBytes = d.r.groupStored[d.dir]
	}
	if metaEmpty(s.Metadata) {
		// written {} when it is meta.json's: the summary is meta.json's
		// (which a restore applies), compared so with the manifest's
		s.Metadata = metaFromJSON(d.meta.Metadata)
	}
	d.end = &s
	d.done = true
	d.r.summaries[d.dir] = s
	d.r.revisions += s.Revisions
	return nil
}
