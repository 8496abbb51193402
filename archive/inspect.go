package archive

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
)

// Report is what Verify found in a sound archive.
type Report struct {
	Header    Header      `json:"header"`
	Databases []DBSummary `json:"databases"` // in archive order, from their end members
	Members   int64       `json:"members"`   // members before the manifest
	Revisions int64       `json:"revisions"`
}

// Verify reads a whole archive and checks everything a restore relies on:
// the tar structure, member names, each member's SHA-256 as stored and
// uncompressed, declared sizes (a member may not decompress beyond them or
// opts.MaxMemberSize), every record's syntax, every attachment reference
// against the blobs before it, each database's end member, and the
// manifest against the members read. The first problem is returned as an
// *Error naming the member. A nil opts means zero options.
func Verify(r io.Reader, opts *ReaderOptions) (Report, error) {
	o := ReaderOptions{}
	if opts != nil {
		o = *opts
	}
	o.CheckDigests = true
	rd, err := NewReader(r, &o)
	if err != nil {
		return Report{}, err
	}
	defer rd.Close()
	rep := Report{Header: rd.Header()}
	for {
		db, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return rep, err
		}
		if err := db.drain(); err != nil {
			return rep, err
		}
		s, _ := db.Summary()
		rep.Databases = append(rep.Databases, s)
	}
	rep.Members, rep.Revisions = rd.members, rd.revisions
	return rep, nil
}

// ShardOf is the shard, of n, that a database name belongs to in a
// sharded backup (Header.Shard): the 64-bit FNV-1a hash of the name's
// UTF-8 bytes, modulo n. n must be >= 1.
func ShardOf(name string, n int) int {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int(h.Sum64() % uint64(n))
}

// List reads the archive's header and manifest and returns the databases
// it holds, sorted by name, with counts, sizes and seqs. When r can be
// read at offsets (a ReaderAtSize: a file, an object store) and the
// archive has an index (version 2), List reads only the footer, the
// index (ReadTOC) and the manifest, which must agree with it (a manifest
// that does not makes List read in order, and fail where the manifest
// and the members disagree). Otherwise members between the header and
// the manifest are skipped unread (with a seek when r is an io.Seeker,
// such as an *os.File). Either way List is fast but checks only the
// header, the member names and the manifest's (and index's) own
// checksum; Verify checks the rest.
func List(r io.Reader) (Header, []DBSummary, error) {
	h, dbs, err := Catalog(r)
	if err != nil {
		return h, nil, err
	}
	return h, dbs, nil
}

// ReadSince reads an archive's header and manifest (as List does) and
// returns what an incremental backup continuing it needs: its id and, per
// database, the seq reached, instance_start_time and checkpoints. Databases
// the archive itself does not hold keep the state its own Since recorded,
// so a chain carries every database forward.
func ReadSince(r io.Reader) (*Since, error) {
	s, _, err := ReadSinceHeld(r)
	return s, err
}

// ReadSinceHeld is ReadSince, also returning the names of the databases
// the archive itself holds (in its manifest's order), without those its
// Since carries forward.
func ReadSinceHeld(r io.Reader) (*Since, []string, error) {
	hdr, dbs, err := List(r)
	if err != nil {
		return nil, nil, err
	}
	s := &Since{ArchiveID: hdr.ID, Source: hdr.Source, Databases: map[string]DBState{}}
	var held []string
	if hdr.Since != nil {
		for name, st := range hdr.Since.Databases {
			s.Databases[name] = st
		}
	}
	for _, db := range dbs {
		st := DBState{Seq: db.Seq, InstanceStart: db.InstanceStart, Checkpoints: db.Checkpoints}
		if st.Seq == nil {
			if prev, ok := s.Databases[db.Name]; ok && db.Since != nil {
				st.Seq = prev.Seq // nothing checkpointed: keep the base
			}
		}
		s.Databases[db.Name] = st
		held = append(held, db.Name)
	}
	return s, held, nil
}

// CheckChain checks that archives, given by their headers in the order
// they are to be applied, form one chain: the first is a full backup and
// each next one is an incremental whose Since names the one before it.
// The error (ErrChain) says which link is broken.
func CheckChain(headers ...Header) error {
	if len(headers) == 0 {
		return &Error{Err: &detailErr{ErrChain, "no archives"}}
	}
	if headers[0].Since != nil {
		return &Error{Err: &detailErr{ErrChain, fmt.Sprintf("archive 1 (%s) is incremental (continues %s); a chain starts with a full backup", headers[0].ID, headers[0].Since.ArchiveID)}}
	}
	seen := map[string]int{}
	for i, h := range headers {
		if j, dup := seen[h.ID]; dup {
			return &Error{Err: &detailErr{ErrChain, fmt.Sprintf("archive %d is archive %d again (%s)", i+1, j+1, h.ID)}}
		}
		seen[h.ID] = i
		if i == 0 {
			continue
		}
		if h.Since == nil {
			return &Error{Err: &detailErr{ErrChain, fmt.Sprintf("archive %d (%s) is a full backup, not an incremental of archive %d", i+1, h.ID, i)}}
		}
		if h.Since.ArchiveID != headers[i-1].ID {
			return &Error{Err: &detailErr{ErrChain, fmt.Sprintf("archive %d (%s) continues %s, not archive %d (%s)", i+1, h.ID, h.Since.ArchiveID, i, headers[i-1].ID)}}
		}
		// Since.Source is the previous header's Source, copied when the
		// incremental was made
		if prev := headers[i-1].Source; h.Since.Source != "" && prev != "" && h.Since.Source != prev {
			return &Error{Err: &detailErr{ErrChain, fmt.Sprintf("archive %d (%s) says archive %d is of source %s, which says %s", i+1, h.ID, i, h.Since.Source, prev)}}
		}
	}
	return nil
}

// ReadHeader reads only an archive's header member. When r can be read
// at offsets (a ReaderAtSize of known size: a file, an object) it is
// read from offset 0 in reads of MinReadSize bytes (one ranged GET on
// S3, where reading in order would fetch parts ahead).
func ReadHeader(r io.Reader) (Header, error) {
	if ra, ok := r.(ReaderAtSize); ok && ra.Size() > 0 {
		r = headSection(ra, ra.Size())
	}
	rd, err := NewReader(r, nil)
	if err != nil {
		return Header{}, err
	}
	defer rd.Close()
	return rd.hdr, nil
}
