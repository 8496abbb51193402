package archive

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Catalog is List that keeps what it could read of a damaged archive.
// When only what follows the manifest is damaged (the index, the footer,
// the tar trailer, bytes appended), it returns the manifest's databases
// with the damage; when the manifest was not reached (the archive is cut
// short, or a tar header before the manifest is damaged) or does not
// check out, the databases are nil. Errors are as List's.
func Catalog(r io.Reader) (Header, []DBSummary, error) {
	if ra, ok := r.(ReaderAtSize); ok && ra.Size() > 0 {
		// the index, if the manifest agrees with it (else the archive is
		// read in order, which names what is wrong)
		if idx, err := ReadTOC(ra, ra.Size()); err == nil && idx.CheckManifest(ra, nil) == nil {
			return idx.Header, idx.Summaries(), nil
		}
	}
	rd, err := NewReader(r, nil)
	if err != nil {
		return Header{}, nil, err
	}
	defer rd.Close()
	dbs, err := rd.skimToManifest()
	if err != nil {
		return rd.hdr, nil, err
	}
	// What follows the manifest is read too: a second archive appended
	// (cat a.sofa b.sofa, whose footer is b's) is refused as the
	// in-order reader refuses it, not listed as a.
	byDir := make(map[string]DBSummary, len(dbs))
	for _, d := range dbs {
		byDir[d.Dir] = d
	}
	return rd.hdr, dbs, rd.readEnd(byDir)
}

// Skim returns the databases the archive holds, for a Reader stopped
// early (Next or a database's reader failed: damage): when the read had
// reached the manifest, those whose groups were read (all of them);
// otherwise it reads on through the tar headers, member contents
// unchecked, to the manifest and returns the databases it lists, so
// that those the read never reached can be named. It fails when the
// damage breaks the tar stream itself (an archive cut short, a damaged
// tar header): then what follows the damage cannot be known. The Reader
// stays stopped.
func (r *Reader) Skim() ([]DBSummary, error) {
	if r.atManifest || r.eof {
		dbs := slices.Collect(maps.Values(r.summaries))
		slices.SortFunc(dbs, func(a, b DBSummary) int { return strings.Compare(a.Name, b.Name) })
		return dbs, nil
	}
	return r.skimToManifest()
}

// skimToManifest reads tar headers, skipping the members' contents, up to
// the manifest, and returns its databases once its own checksum and
// archive id check out.
func (r *Reader) skimToManifest() ([]DBSummary, error) {
	r.sp = nil // members are skipped, not read
	for {
		h, err := r.tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, &Error{Err: &detailErr{ErrTruncated, fmt.Sprintf("archive ends after member %q without a manifest", r.last)}}
		}
		if err != nil {
			return nil, r.tarErr(err)
		}
		p, err := parseName(h.Name)
		if err != nil {
			return nil, err
		}
		r.last = h.Name
		if p.kind != kindManifest {
			continue
		}
		if h.Size > r.opts.MaxMemberSize {
			return nil, memberErr(h.Name, ErrTooLarge, "")
		}
		if err := rawRecordsAgree(h, p); err != nil {
			return nil, err
		}
		man, _, err := r.readManifest(h.Name, p.codec, h.PAXRecords[paxSHA256], h.PAXRecords[paxRawSHA256])
		if err != nil {
			return nil, err
		}
		if man.ID != r.hdr.ID {
			return nil, memberErr(h.Name, ErrManifest, "archive id differs from the header's")
		}
		return man.Databases, nil
	}
}
