package sofa_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestRestore_SetDamagedMemberOthersGoOn: damage in one member of a
// sharded backup's set (its footer, after every group, which leaves the
// set to be read in order; or a doc chunk of one of its databases, read
// at its offset) is confined to that member, or that group: the other
// members' databases are restored, equal to the source, while the run
// still fails with one line naming the damage. Before, a restore in
// order stopped at the damaged member and listed the members after it
// not started.
func TestRestore_SetDamagedMemberOthersGoOn(t *testing.T) {
	ctx := t.Context()
	srv := couchtest.Start(t)
	names := manyDBs(t, srv, 8)
	dir := t.TempDir()
	base := filepath.Join(dir, "s.sofa")
	for i := range 2 {
		_, err := sofa.Backup(ctx, openAt(t, srv.URL, nil), openAt(t, base, nil), sofa.BackupOptions{
			Selection: sofa.Selection{Include: []string{"db-*"}, Shard: sofa.Shard{Index: i, Count: 2}}, SetID: "d"})
		if err != nil {
			t.Fatal(err)
		}
	}
	first := filepath.Join(dir, "s.shard-0-of-2.sofa")
	data, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	toc, err := archive.ReadTOC(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	a := &damagedArchive{data: data}
	for _, d := range toc.Databases {
		a.order = append(a.order, d.Summary.Name)
	}
	if len(a.order) < 2 || len(a.order) == len(names) {
		t.Fatalf("member 0 holds %v: want some of the databases, at least 2", a.order)
	}
	tgt := couchtest.Start(t)
	dst := openAt(t, tgt.URL, nil)
	for n, c := range []struct {
		name   string
		at     int64
		member string
		whole  int // member 0's groups restored before the damage
		// after: the status of member 0's groups after the damaged one
		// (a sound index restores each group at its offset)
		after fleet.Status
	}{
		{"damaged footer", int64(len(data)) - 1536 + 40, "footer.json", len(a.order), ""},
		{"damaged group", a.chunkAt(t, a.order[1]) + 10, "db/" + a.order[1] + "/pack-", 1, fleet.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(first, flipped(data, c.at), 0o600); err != nil {
				t.Fatal(err)
			}
			set, err := sofa.OpenSet(ctx, openAt(t, base, nil), sofa.SetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			prefix := fmt.Sprintf("c%d-", n)
			renames := map[string]string{}
			for _, name := range names {
				renames[name] = prefix + name
			}
			plan, err := sofa.PlanRestoreSet(ctx, set, sofa.RestoreOptions{Renames: renames})
			if err != nil {
				t.Fatal(err)
			}
			sum, err := plan.Run(ctx, dst)
			if err == nil || !errors.Is(err, archive.ErrChecksum) || !strings.Contains(err.Error(), c.member) {
				t.Fatalf("restore: %v; want the damage named (%s)", err, c.member)
			}
			byName := map[string]fleet.DBResult{}
			for _, d := range sum.DBs {
				byName[strings.TrimPrefix(d.Name, prefix)] = d
			}
			in0 := map[string]int{}
			for i, name := range a.order {
				in0[name] = i
			}
			for _, name := range names {
				r := byName[name]
				i, damaged := in0[name]
				switch {
				case !damaged || i < c.whole || i > c.whole && c.after == fleet.StatusOK:
					if r.Status != fleet.StatusOK {
						t.Errorf("%s: %s %s, want ok", name, r.Status, r.Error)
					}
					couchtest.AssertEqual(t, srv.DBURL(name), tgt.DBURL(prefix+name))
				case i == c.whole:
					if r.Status != fleet.StatusFailed {
						t.Errorf("%s (the damaged group): %s %s, want failed", name, r.Status, r.Error)
					}
				default:
					if r.Status != fleet.StatusNotStarted {
						t.Errorf("%s (after the damage in its member): %s %s, want not_started", name, r.Status, r.Error)
					}
				}
			}
		})
	}
}
