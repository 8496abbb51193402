package sofa

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/storage"
)

// A sharded backup (BackupOptions.Selection.Shard i/n) of ARCHIVE writes
// its member under ShardArchiveName(ARCHIVE, i/n) and the set's manifest
// under SetManifestName(ARCHIVE); every worker writes the same manifest.
// With ARCHIVE "backup.sofa" and --shard 2/8:
//
//	backup.shard-2-of-8.sofa   the member: the databases of shard 2
//	backup.set.json            {"format":"sofa-archive-set","version":1,"count":8,...}
//
// Each member's header records its shard (index, count and the set id),
// so a member of another run or of another n is told apart from a
// member of this set.

// SetFormat and SetVersion name the set manifest's format.
const (
	SetFormat  = "sofa-archive-set"
	SetVersion = 1
)

// SetManifest is the JSON of a set manifest. Members are the members'
// names relative to the manifest's own location (the same directory or
// key prefix), Members[i] being shard i.
type SetManifest struct {
	Format  string   `json:"format"`  // SetFormat
	Version int      `json:"version"` // SetVersion
	Count   int      `json:"count"`   // n
	SetID   string   `json:"set_id,omitempty"`
	Members []string `json:"members"`
}

// ErrPartialSet: a set whose members are not all present (restore and
// verify refuse it unless SetOptions.AllowPartial).
var ErrPartialSet = errors.New("the set is partial")

// splitName splits a location into its directory or key prefix (with
// its trailing "/"), its stem and its extension (".sofa"; "" when none).
func splitName(name string) (dir, stem, ext string) {
	if i := strings.LastIndex(name, "/"); i >= 0 {
		dir, name = name[:i+1], name[i+1:]
	}
	if i := strings.LastIndex(name, "."); i > 0 {
		return dir, name[:i], name[i:]
	}
	return dir, name, ""
}

// ShardArchiveName is the name of the member of shard s of the sharded
// backup ARCHIVE: "backup.sofa" with 2/8 is "backup.shard-2-of-8.sofa";
// a name without extension gets the suffix at its end.
func ShardArchiveName(archive string, s Shard) string {
	dir, stem, ext := splitName(archive)
	return fmt.Sprintf("%s%s.shard-%d-of-%d%s", dir, stem, s.Index, s.Count, ext)
}

// SetManifestName is the name of the set manifest of the sharded backup
// ARCHIVE: "backup.sofa" gives "backup.set.json". A name that already
// ends in ".set.json" is its own manifest.
func SetManifestName(archive string) string {
	if strings.HasSuffix(archive, ".set.json") {
		return archive
	}
	dir, stem, _ := splitName(archive)
	return dir + stem + ".set.json"
}

func setManifest(archive string, n int, setID string) SetManifest {
	m := SetManifest{Format: SetFormat, Version: SetVersion, Count: n, SetID: setID}
	for i := range n {
		_, stem, ext := splitName(ShardArchiveName(archive, Shard{Index: i, Count: n}))
		m.Members = append(m.Members, stem+ext)
	}
	return m
}

// writeSetManifest writes (or overwrites with the same bytes) the set
// manifest of the sharded backup archive.
func writeSetManifest(ctx context.Context, st storage.Store, archive string, n int, setID string) error {
	b, err := json.MarshalIndent(setManifest(archive, n, setID), "", "  ")
	if err != nil {
		return err
	}
	name := SetManifestName(archive)
	w, err := st.Create(ctx, name, storage.CreateOptions{Overwrite: true})
	if err != nil {
		return fmt.Errorf("set manifest %s: %w", name, err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		w.Abort()
		return fmt.Errorf("set manifest %s: %w", name, err)
	}
	if err := w.Commit(); err != nil {
		return fmt.Errorf("set manifest %s: %w", name, err)
	}
	return nil
}

// checkSetManifest refuses, before a sharded backup of archive starts,
// a set manifest of its name that describes another set (another count
// or set id: every worker of one run writes the same bytes), which the
// backup would replace: the set it names would no longer be found by
// that name. storage.ErrExist, as for an archive (Overwrite replaces).
func checkSetManifest(ctx context.Context, st storage.Store, archive string, n int, setID string) error {
	name := SetManifestName(archive)
	r, err := st.Open(ctx, name)
	if errors.Is(err, storage.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("set manifest %s: %w", name, err)
	}
	defer r.Close()
	have, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return fmt.Errorf("set manifest %s: %w", name, err)
	}
	want, err := json.MarshalIndent(setManifest(archive, n, setID), "", "  ")
	if err != nil {
		return err
	}
	if bytes.Equal(bytes.TrimSpace(have), want) {
		return nil
	}
	return &OptionError{Err: fmt.Errorf("set manifest %s: %w: it describes another set (a backup of this name with another --shard count or --set-id)", name, storage.ErrExist)}
}

// SetOptions configure OpenSet.
type SetOptions struct {
	// AllowPartial accepts a set some of whose members are missing (they
	// are listed in ArchiveSet.Missing). A member that is there but
	// belongs to another set is refused all the same.
	AllowPartial bool
}

// An ArchiveSet is the checked set of a sharded backup.
type ArchiveSet struct {
	// Manifest is the set manifest's name in the store.
	Manifest string
	// Count is n, the number of shards; SetID the id the backup was
	// given ("" when none).
	Count int
	SetID string
	// Incremental says the members are incremental backups, each
	// continuing the member of its shard of an earlier set (see
	// ChainSets); false: full backups.
	Incremental bool
	// Members are the members present, in shard order; Missing the
	// names of those absent (only with SetOptions.AllowPartial).
	Members []*Endpoint
	Missing []string

	// byShard[i] is shard i's member (nil when missing), headers[i] its
	// header, locs[i] its name (present or not).
	byShard []*Endpoint
	headers []archive.Header
	locs    []string
}

// Spread is the time between the first and the last start of the present
// members' backups (their headers' creation times): the workers of one
// run start close together, so a wide spread in a set without a SetID
// may mean a member left by another run.
func (s *ArchiveSet) Spread() time.Duration {
	var first, last time.Time
	for i, m := range s.byShard {
		if m == nil {
			continue
		}
		c := s.headers[i].Created
		if first.IsZero() || c.Before(first) {
			first = c
		}
		if c.After(last) {
			last = c
		}
	}
	return last.Sub(first)
}

// Member returns the member of shard i, nil when it is missing.
func (s *ArchiveSet) Member(i int) *Endpoint {
	if i < 0 || i >= len(s.byShard) {
		return nil
	}
	return s.byShard[i]
}

// IsSet reports whether the archive endpoint ep names a set: its name
// ends in ".set.json", or no archive has its name but a set manifest
// (SetManifestName) exists.
func IsSet(ctx context.Context, ep *Endpoint) bool {
	if opened(ep) != nil || ep.Kind() != KindArchive || ep.archive == storage.Stdio {
		return false
	}
	if strings.HasSuffix(ep.archive, ".set.json") {
		return true
	}
	if _, err := ep.store.Stat(ctx, ep.archive); err == nil || !errors.Is(err, storage.ErrNotExist) {
		return false
	}
	_, err := ep.store.Stat(ctx, SetManifestName(ep.archive))
	return err == nil
}

// OpenSet reads the set manifest named by ep (the manifest itself, or
// the ARCHIVE name the sharded backup was given) and checks the members:
// each present one must be an archive whose header says it is shard i of
// the same n with the same set id, all of one source server, and all
// full backups or all incremental ones (ArchiveSet.Incremental; a chain
// of sets is checked by ChainSets). Missing members are an error
// wrapping ErrPartialSet that names them, unless o.AllowPartial; a set
// none of whose members is present always is.
func OpenSet(ctx context.Context, ep *Endpoint, o SetOptions) (*ArchiveSet, error) {
	if err := opened(ep); err != nil {
		return nil, err
	}
	if ep.Kind() != KindArchive || ep.archive == storage.Stdio {
		return nil, optionErr("%s is not an archive set", ep)
	}
	name := SetManifestName(ep.archive)
	r, err := ep.store.Open(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("set manifest: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(r, 1<<20))
	r.Close()
	if err != nil {
		return nil, fmt.Errorf("set manifest %s: %w", name, err)
	}
	var m SetManifest
	if err := json.Unmarshal(b, &m); err != nil {
		if bytes.Contains(b, []byte(`"`+SetFormat+`"`)) {
			// found by a tester: a truncated one was called not one
			return nil, fmt.Errorf("%s: damaged set manifest (truncated or edited): %w", name, err)
		}
		return nil, fmt.Errorf("%s is not a set manifest of sofa (not JSON: %w)", name, err)
	}
	if m.Format != SetFormat {
		return nil, fmt.Errorf("%s is not a set manifest of sofa (want format %q)", name, SetFormat)
	}
	if m.Version != SetVersion {
		return nil, fmt.Errorf("%s: set manifest version %d is not supported (this sofa reads version %d)", name, m.Version, SetVersion)
	}
	if m.Count < 1 || len(m.Members) != m.Count {
		return nil, fmt.Errorf("%s: damaged set manifest: %d members for a count of %d", name, len(m.Members), m.Count)
	}
	dir, _, _ := splitName(name)
	set := &ArchiveSet{Manifest: name, Count: m.Count, SetID: m.SetID,
		byShard: make([]*Endpoint, m.Count), headers: make([]archive.Header, m.Count), locs: make([]string, m.Count)}
	source, sourceOf := "", ""
	kindOf := "" // the first member present: its kind must be every member's
	for i, member := range m.Members {
		if member == "" || strings.Contains(member, "/") {
			return nil, fmt.Errorf("%s: damaged set manifest: member %d is %q", name, i, member)
		}
		loc := dir + member
		set.locs[i] = loc
		f, err := ep.store.Open(ctx, loc)
		if errors.Is(err, storage.ErrNotExist) {
			set.Missing = append(set.Missing, loc)
			continue
		}
		if err != nil {
			return nil, err
		}
		h, err := archive.ReadHeader(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", loc, err)
		}
		switch sh := h.Shard; {
		case sh == nil:
			return nil, fmt.Errorf("%s is not a member of set %s: it is not a sharded backup", loc, name)
		case sh.Count != m.Count || sh.Index != i:
			return nil, fmt.Errorf("%s is not a member of set %s: it is shard %d of %d, the set wants shard %d of %d", loc, name, sh.Index, sh.Count, i, m.Count)
		case sh.SetID != m.SetID:
			return nil, fmt.Errorf("%s is not a member of set %s: it was written by run %q, the set by run %q (a worker of another run left it)", loc, name, sh.SetID, m.SetID)
		}
		switch {
		case kindOf == "":
			kindOf, set.Incremental = loc, h.Since != nil
		case set.Incremental != (h.Since != nil):
			return nil, fmt.Errorf("set %s mixes full and incremental members (%s is %s, %s is not): give every worker of one run the same --since, or none", name, kindOf, incrementalWord(set.Incremental), loc)
		}
		if h.Source != "" {
			if source != "" && h.Source != source {
				return nil, fmt.Errorf("%s is not a member of set %s: it is a backup of server %s, %s of server %s", loc, name, h.Source, sourceOf, source)
			}
			source, sourceOf = h.Source, loc
		}
		mep := &Endpoint{scheme: ep.scheme, location: Redact(loc), archive: loc, store: ep.store}
		set.Members = append(set.Members, mep)
		set.byShard[i], set.headers[i] = mep, h
	}
	if len(set.Members) == 0 {
		// --allow-partial or not: nothing would be restored, checked or
		// listed but the manifest.
		return nil, fmt.Errorf("%w: none of the %d members of set %s is present (%s)", ErrPartialSet, m.Count, name, strings.Join(set.Missing, ", "))
	}
	if len(set.Missing) > 0 && !o.AllowPartial {
		return nil, fmt.Errorf("%w: %d of %d members are missing (%s): their databases would not be restored or checked; give --allow-partial to use the %d present",
			ErrPartialSet, len(set.Missing), m.Count, strings.Join(set.Missing, ", "), len(set.Members))
	}
	return set, nil
}

func incrementalWord(incremental bool) string {
	if incremental {
		return "incremental"
	}
	return "a full backup"
}

// notBoth refuses a backup to ARCHIVE (name) when other exists: a plain
// archive of that name beside a set's manifest for it (or the reverse)
// makes restore, verify and ls of ARCHIVE take the plain archive and
// leave the set unread (see IsSet). Either may be written, never both.
func notBoth(ctx context.Context, st storage.Store, other, name string) error {
	_, err := st.Stat(ctx, other)
	if err == nil {
		if other == name {
			return optionErr("%s exists, an archive that is not sharded: a set of the same name would be left unread by restore, verify and ls of %s (they take the archive); give the sharded backup another name", Redact(name), Redact(name))
		}
		return optionErr("%s exists, the manifest of a sharded backup's set named %s: restore, verify and ls of %s would take this archive and leave the set unread; give the backup another name", Redact(other), Redact(name), Redact(name))
	}
	// Not there, or not to be known (access denied, the store down):
	// writing the archive says what is wrong, naming it, not other.
	return nil
}
