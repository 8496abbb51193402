package sofa

import (
	"context"
	"errors"
	"fmt"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/storage"
)

// Statuses of an ArchivesCheck, worst last.
const (
	ArchivesSound      = "sound"      // every archive is whole and intact
	ArchivesIncomplete = "incomplete" // intact, but a database of one was not backed up whole
	ArchivesDamaged    = "damaged"    // one could not be read or is damaged
)

// ArchiveCheck is the check of one archive, ready for encoding/json.
type ArchiveCheck struct {
	// Archive is the archive's name in its store.
	Archive string `json:"archive"`
	// Location is the endpoint's String: its location, redacted.
	Location string `json:"-"`
	// Report is CheckArchive's report; nil when the archive is damaged.
	Report *archive.Report `json:"report,omitempty"`
	// Error says what is wrong: the damage, or that the archive is
	// intact but incomplete; "" when sound.
	Error string `json:"error,omitempty"`
	// Status is ArchivesSound, ArchivesIncomplete or ArchivesDamaged.
	Status string `json:"-"`
	// Incomplete names the databases of an intact archive not backed
	// up whole (each has its Error in Report).
	Incomplete []string `json:"-"`
}

// ArchivesCheck is the outcome of CheckArchives and VerifyChain.
type ArchivesCheck struct {
	// Status is the worst of the archives' statuses (ArchivesSound for
	// none).
	Status string
	// Archives are the checks, in the order given.
	Archives []ArchiveCheck
	// Databases counts the databases of the archives not damaged.
	Databases int
}

// Worst is the Error of the damaged archive found last, else of the
// first incomplete one; "" when every archive is sound.
func (c *ArchivesCheck) Worst() string {
	worst := ""
	for _, a := range c.Archives {
		if a.Status == ArchivesDamaged || a.Status == ArchivesIncomplete && worst == "" {
			worst = a.Error
		}
	}
	return worst
}

// CheckArchives checks each archive endpoint alone, as CheckArchive
// does: a damaged one (an error naming it and its first damaged member)
// or one intact but holding a database not backed up whole does not
// stop the others. The error is non-nil only for an endpoint that is no
// archive (an *OptionError) or a cancelled ctx; what was found is in the
// summary.
func CheckArchives(ctx context.Context, archives ...*Endpoint) (*ArchivesCheck, error) {
	if err := opened(archives...); err != nil {
		return nil, err
	}
	sum := &ArchivesCheck{Status: ArchivesSound}
	for _, ep := range archives {
		if ep.Kind() != KindArchive {
			return nil, optionErr("%s is not an archive", ep)
		}
		c := ArchiveCheck{Archive: ep.Archive(), Location: ep.String(), Status: ArchivesSound}
		rep, err := CheckArchive(ctx, ep)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("check %s: %w", ep, ctx.Err())
			}
			if errors.Is(err, storage.ErrNotReadable) {
				return nil, &OptionError{Err: err} // a directory, a pipe: no archive to judge
			}
			c.Status, c.Error = ArchivesDamaged, err.Error()
			sum.Status = ArchivesDamaged
			sum.Archives = append(sum.Archives, c)
			continue
		}
		c.Report = rep
		sum.Databases += len(rep.Databases)
		for _, db := range rep.Databases {
			if db.Error != "" {
				c.Incomplete = append(c.Incomplete, db.Name)
			}
		}
		if len(c.Incomplete) > 0 {
			c.Status = ArchivesIncomplete
			c.Error = fmt.Sprintf("archive %s is intact but incomplete: %d of %d databases were not backed up completely", ep, len(c.Incomplete), len(rep.Databases))
			if sum.Status == ArchivesSound {
				sum.Status = ArchivesIncomplete
			}
		}
		sum.Archives = append(sum.Archives, c)
	}
	return sum, nil
}

// VerifyChain checks a chain of archives (a full one, then its
// incrementals in order) as a restore of them would: that they form a
// chain (CheckChain: an *OptionError names the broken link, and no
// archive is read), then each archive alone (CheckArchives).
func VerifyChain(ctx context.Context, archives ...*Endpoint) (*ArchivesCheck, error) {
	if err := opened(archives...); err != nil {
		return nil, err
	}
	if err := CheckChain(ctx, archives...); err != nil {
		return nil, err
	}
	return CheckArchives(ctx, archives...)
}
