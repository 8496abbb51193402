package sofa

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/replicate"
)

// sinceLeavesOut refuses an incremental backup that leaves out databases
// of the archive it continues (since, named prev) which the source still
// holds: a chain's restore takes a database absent from its last archive
// for one deleted at the source, and would not restore it. A backup of
// one database continues a backup of that database only; a server's
// continues one whose databases it selects too (databases deleted at the
// source since are not selected, and rightly absent: those prev holds,
// named in held, are returned sorted, for the Summary's
// DeletedSincePrevious). dbs is this backup's selection. An *OptionError names the databases.
func sinceLeavesOut(ctx context.Context, src *Endpoint, prev string, since *archive.Since, held, dbs []string) (deleted []string, err error) {
	var out []string
	for name := range since.Databases {
		if slices.Contains(dbs, name) {
			continue
		}
		if src.couch.DBName != "" {
			out = append(out, name) // another database than this one
			continue
		}
		if _, err := src.couch.Server.DB(name).Info(ctx); !errors.Is(err, replicate.ErrNotFound) {
			out = append(out, name) // still on the source (or unknown: not assumed deleted)
		} else if slices.Contains(held, name) {
			deleted = append(deleted, name) // deleted earlier: already absent from prev
		}
	}
	slices.Sort(deleted)
	if len(out) == 0 {
		return deleted, nil
	}
	slices.Sort(out)
	shown := out
	if len(shown) > 5 {
		shown = append(slices.Clone(shown[:5]), "...")
	}
	what := "that this backup of " + src.String() + " leaves out"
	if src.couch.DBName != "" {
		what = "other than " + src.String() + ", which a backup of that one database does not hold"
	}
	return nil, optionErr("--since %s: that archive holds %d databases %s (%s): a restore of the chain would take them for deleted at the source and not restore them; continue it with a backup of the same databases, or take a full backup", Redact(prev), len(out), what, strings.Join(shown, ", "))
}
