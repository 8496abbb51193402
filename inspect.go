package sofa

import (
	"context"
	"errors"
	"fmt"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/replicate"
)

// DBListing is one database of a server as List reports it: its
// doc_count, doc_del_count and update_seq, or, for a database of a
// server listing that could not be read (the account may not open it,
// or it was deleted since `_all_dbs`), Error and no counts.
type DBListing struct {
	Name      string `json:"name"`
	DocCount  int64  `json:"doc_count"`
	DelCount  int64  `json:"doc_del_count"`
	UpdateSeq string `json:"update_seq"`
	Error     string `json:"error,omitempty"`
}

// List lists the databases of a server endpoint with their counts, in
// the server's order (`_all_dbs`, then `GET /db` for each), or the one
// database of a database endpoint. In a server's listing, a database the
// account may not open (401, 403) or deleted meanwhile (404) is a row
// with its Error; any other failure is the error.
func List(ctx context.Context, ep *Endpoint) ([]DBListing, error) {
	if err := opened(ep); err != nil {
		return nil, err
	}
	if ep.couch == nil {
		return nil, optionErr("list: %s is an archive: see ListArchive", ep)
	}
	srv := ep.couch.Server
	names := []string{ep.couch.DBName}
	if ep.couch.DBName == "" {
		var err error
		if names, err = fleet.ListDBs(ctx, srv, 1000); err != nil {
			return nil, fmt.Errorf("list databases: %w", err)
		}
	}
	rows := make([]DBListing, 0, len(names))
	for _, n := range names {
		info, err := srv.DB(n).Info(ctx)
		if err != nil && ep.couch.DBName == "" && (couch.Denied(err) || errors.Is(err, replicate.ErrNotFound)) {
			rows = append(rows, DBListing{Name: n, Error: err.Error()})
			continue
		}
		if err != nil {
			return nil, err
		}
		rows = append(rows, DBListing{Name: n, DocCount: info.DocCount, DelCount: info.DelCount, UpdateSeq: info.UpdateSeq.String()})
	}
	return rows, nil
}

// ListArchive reads the header and the manifest of an archive endpoint
// (the manifest's summary of each database: counts, sizes, seq reached,
// Error for one not backed up whole). Errors name the archive.
func ListArchive(ctx context.Context, ep *Endpoint) (archive.Header, []archive.DBSummary, error) {
	if err := opened(ep); err != nil {
		return archive.Header{}, nil, err
	}
	if ep.Kind() != KindArchive {
		return archive.Header{}, nil, optionErr("%s is not an archive", ep)
	}
	f, err := ep.store.Open(ctx, ep.archive)
	if err != nil {
		return archive.Header{}, nil, err
	}
	defer f.Close()
	hdr, dbs, err := archive.List(f)
	if err != nil {
		return hdr, dbs, fmt.Errorf("%s: %w", ep, err)
	}
	return hdr, dbs, nil
}

// CheckArchive reads a whole archive endpoint and checks everything a
// restore relies on (archive.Verify: every member's checksums and sizes,
// the records, the attachment references, the manifest). A damaged
// archive is an error naming it and the first damaged member; a sound
// one's databases not backed up whole have their Error set in the
// report.
func CheckArchive(ctx context.Context, ep *Endpoint) (*archive.Report, error) {
	if err := opened(ep); err != nil {
		return nil, err
	}
	if ep.Kind() != KindArchive {
		return nil, optionErr("%s is not an archive", ep)
	}
	f, err := ep.store.Open(ctx, ep.archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rep, err := archive.Verify(f, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ep, err)
	}
	return &rep, nil
}
