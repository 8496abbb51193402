package sofa

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/storage"
)

// archiveDBs are the databases of one archive that a restore selects,
// in name order. known is false when its catalog could not be read
// before the restore (stdin, read once; an archive cut short, or
// damaged before its manifest): the read in order learns them as it
// goes.
type archiveDBs struct {
	names []string
	known bool
}

// checkSelection reads the manifests of archive files before anything is
// written: a database URL as target takes exactly one selected database,
// every --rename must name a database of the archives, and no two
// selected databases may be restored into one database of ts, the target
// server (nil: an archive; see distinctTargets). (An archive read from
// stdin cannot be looked at twice; it is checked as it goes.)
//
// It returns, per archive, the selected databases of its manifest, to
// list those a stopped restore did not reach. An archive whose index,
// footer or manifest is damaged or missing (cut short) is no error here:
// damaged is that damage (the first such archive's), and the restore
// reads the archives in order, as from stdin, restoring what comes
// before the damage; its databases are known when the manifest could
// still be read (the damage after it), and the checks above are then
// made as the read goes.
func (c *restorer) checkSelection(ctx context.Context, archives []*Endpoint, filter fleet.Filter, renames map[string]string, oneDB bool, ts any) (sel []archiveDBs, damaged error, err error) {
	sel = make([]archiveDBs, len(archives))
	if len(archives) == 1 && archives[0].archive == storage.Stdio {
		return sel, nil, nil
	}
	selected := map[string]bool{}
	all := map[string]bool{}
	allKnown := true
	for i, a := range archives {
		path := a.archive
		f, err := a.store.Open(ctx, path)
		if err != nil {
			return nil, nil, err
		}
		_, dbs, err := archive.Catalog(f)
		f.Close()
		if ae := (*archive.Error)(nil); err != nil && errors.As(err, &ae) {
			err = fmt.Errorf("%s: %w", path, err)
			if damaged == nil {
				damaged = err
			}
		} else if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		sel[i].known = dbs != nil || err == nil
		allKnown = allKnown && sel[i].known
		for _, d := range dbs {
			all[d.Name] = true
			if filter.Match(d.Name) {
				selected[d.Name] = true
				sel[i].names = append(sel[i].names, d.Name)
			}
		}
	}
	c.archived = all
	if !allKnown {
		// the reader in order refuses a second database for a database
		// URL, and a --rename of a database it never meets renames none
		return sel, damaged, nil
	}
	for old := range renames {
		if !all[old] {
			return nil, nil, optionErr("--rename %s=...: the archive holds no database %q", old, old)
		}
	}
	if oneDB && len(selected) == 0 {
		if len(filter.Include)+len(filter.Exclude) > 0 {
			var sel []string
			for _, p := range filter.Include {
				sel = append(sel, "--include "+p)
			}
			for _, p := range filter.Exclude {
				sel = append(sel, "--exclude "+p)
			}
			return nil, nil, optionErr("no database of the archive matches %s: the archive holds %s", strings.Join(sel, " "), namesOf(all))
		}
		return nil, nil, optionErr("the archive holds no database to restore (it holds %s)", namesOf(all))
	}
	if oneDB && len(selected) != 1 {
		return nil, nil, optionErr("the target is a database URL but %d databases of the archive are selected: restore into a server URL, or select one with --include", len(selected))
	}
	if !oneDB {
		if err := distinctTargets(ts, renames, "restored", slices.Collect(maps.Keys(selected))); err != nil {
			return nil, nil, err
		}
	}
	return sel, damaged, nil
}

// goneDB is a database of a chain absent from the chain's last archive:
// last is the index of the last archive holding it, end that of its
// chain's last archive.
type goneDB struct{ last, end int }

// checkChain reads the headers of archive files and refuses archives that
// do not form a chain (a full archive, then incrementals in order). For a
// chain of several it also reads each manifest (see chainStates). A
// single archive gives nil maps.
func checkChain(ctx context.Context, archives []*Endpoint) (fullFrom map[string]int, gone map[string]goneDB, err error) {
	for _, a := range archives {
		if a.archive == storage.Stdio && len(archives) > 1 {
			return nil, nil, optionErr("stdin (-) can only be the one archive of a restore")
		}
	}
	if len(archives) == 1 {
		if archives[0].archive == storage.Stdio {
			return nil, nil, nil
		}
		h, err := readHeader(ctx, archives[0])
		if err != nil {
			return nil, nil, err
		}
		if err := archive.CheckChain(h); err != nil {
			return nil, nil, &OptionError{Err: chainNamed(err, archives)}
		}
		return nil, nil, nil
	}
	all := make([]int, len(archives))
	for i := range all {
		all[i] = i
	}
	headers, fullFrom, gone, err := chainStates(ctx, archives, [][]int{all})
	if err != nil {
		return nil, nil, err
	}
	if err := archive.CheckChain(headers...); err != nil {
		return nil, nil, &OptionError{Err: chainNamed(err, archives)} // the arguments, not the archives, are wrong
	}
	return fullFrom, gone, nil
}

// chainNamed adds to a broken chain's error (which numbers the archives
// in the order given) the names those numbers stand for.
func chainNamed(err error, archives []*Endpoint) error {
	names := make([]string, len(archives))
	for i, a := range archives {
		names[i] = fmt.Sprintf("%d: %s", i+1, a)
	}
	return fmt.Errorf("%w (archives in the order given: %s)", err, strings.Join(names, ", "))
}

// readHeader reads the header of archive a.
func readHeader(ctx context.Context, a *Endpoint) (archive.Header, error) {
	f, err := a.store.Open(ctx, a.archive)
	if err != nil {
		return archive.Header{}, err
	}
	defer f.Close()
	h, err := archive.ReadHeader(f)
	if err != nil {
		return h, fmt.Errorf("%s: %w", a.archive, err)
	}
	return h, nil
}

// chainStates reads the header and manifest of every archive of chains
// (each a list of indexes into archives, in chain order; a database is
// in one chain only, as in the shards of a chain of sets). It returns
// the headers (by index) and, per database, the index of the last
// archive of its chain holding a full backup of it: a database recreated
// at the source between two backups is stored in full again, and its
// restore starts there (what earlier archives hold of it belongs to the
// deleted database). gone holds the databases absent from their chain's
// last archive.
func chainStates(ctx context.Context, archives []*Endpoint, chains [][]int) ([]archive.Header, map[string]int, map[string]goneDB, error) {
	headers := make([]archive.Header, len(archives))
	fullFrom := map[string]int{}
	gone := map[string]goneDB{}
	for _, chain := range chains {
		lastIn := map[string]int{}
		for k, i := range chain {
			a := archives[i]
			f, err := a.store.Open(ctx, a.archive)
			if err != nil {
				return nil, nil, nil, err
			}
			h, dbs, err := archive.List(f)
			f.Close()
			if err != nil {
				return nil, nil, nil, fmt.Errorf("%s: %w", a.archive, err)
			}
			headers[i] = h
			for _, d := range dbs {
				if k == 0 || len(d.Since) == 0 {
					fullFrom[d.Name] = i
				}
				lastIn[d.Name] = i
			}
		}
		end := chain[len(chain)-1]
		for name, i := range lastIn {
			if i != end {
				gone[name] = goneDB{last: i, end: end}
			}
		}
	}
	return headers, fullFrom, gone, nil
}

// selectiveIndex returns the index of an archive readable at offsets
// when filter leaves some of its databases out (a restore with
// --include): then only what the selected ones need is read. Nil when
// the archive has no index, cannot be read at offsets (stdin), or every
// database is selected (read in order, the manifest checked too).
func selectiveIndex(f storage.Reader, filter fleet.Filter) *archive.TOC {
	if f.Size() <= 0 {
		return nil
	}
	idx, err := archive.ReadTOC(f, f.Size())
	if err != nil {
		return nil
	}
	// A damaged manifest: the archive is read whole, in order, and the
	// damage reported when the reader reaches it.
	if err := idx.CheckManifest(f, nil); err != nil {
		return nil
	}
	for _, d := range idx.Databases {
		if !filter.Match(d.Summary.Name) {
			return idx
		}
	}
	return nil
}

// namesOf lists up to five database names of an archive, for a message.
func namesOf(all map[string]bool) string {
	names := slices.Sorted(maps.Keys(all))
	switch {
	case len(names) == 0:
		return "none"
	case len(names) > 5:
		return fmt.Sprintf("%s and %d more", strings.Join(names[:5], ", "), len(names)-5)
	}
	return strings.Join(names, ", ")
}
