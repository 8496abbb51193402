package sofa_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/storage"
)

// writeArchive writes an archive of empty databases named whole (closed)
// and cut (aborted: not backed up whole) into st, without a server.
func writeArchive(t *testing.T, st storage.Store, name string, whole, cut []string) {
	t.Helper()
	ctx := context.Background()
	w, err := st.Create(ctx, name, storage.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	aw, err := archive.NewWriter(w, archive.Options{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, db := range append(append([]string{}, whole...), cut...) {
		d, err := aw.Database(db)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(db, "cut") {
			err = d.Abort("the source failed")
		} else {
			err = d.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := aw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestCheckArchives: each archive is checked alone and none stops the
// others; the summary's status is the worst (damaged over incomplete
// over sound), Worst names the archive that decides it. VerifyChain refuses archives
// that are no chain before reading any.
func TestCheckArchives(t *testing.T) {
	ctx := context.Background()
	st := &storage.Memory{}
	writeArchive(t, st, "sound.sofa", []string{"a", "b"}, nil)
	writeArchive(t, st, "cut.sofa", []string{"a"}, []string{"cut1"})
	w, err := st.Create(ctx, "junk.sofa", storage.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("not an archive")); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	open := func(names ...string) []*sofa.Endpoint {
		var eps []*sofa.Endpoint
		for _, n := range names {
			ep, err := sofa.Open(ctx, n, sofa.OpenOptions{Store: st})
			if err != nil {
				t.Fatal(err)
			}
			eps = append(eps, ep)
		}
		return eps
	}

	sum, err := sofa.CheckArchives(ctx, open("sound.sofa")...)
	if err != nil || sum.Status != sofa.ArchivesSound || sum.Databases != 2 || sum.Worst() != "" || sum.Archives[0].Report == nil {
		t.Fatalf("sound: %+v, %v", sum, err)
	}
	sum, err = sofa.CheckArchives(ctx, open("sound.sofa", "cut.sofa")...)
	if err != nil || sum.Status != sofa.ArchivesIncomplete || sum.Databases != 4 ||
		sum.Archives[1].Status != sofa.ArchivesIncomplete || len(sum.Archives[1].Incomplete) != 1 || sum.Archives[1].Incomplete[0] != "cut1" ||
		sum.Worst() != "archive cut.sofa is intact but incomplete: 1 of 2 databases were not backed up completely" {
		t.Fatalf("incomplete: %+v (%q), %v", sum, sum.Worst(), err)
	}
	sum, err = sofa.CheckArchives(ctx, open("cut.sofa", "junk.sofa", "sound.sofa")...)
	if err != nil || sum.Status != sofa.ArchivesDamaged || len(sum.Archives) != 3 || sum.Databases != 4 ||
		sum.Archives[1].Status != sofa.ArchivesDamaged || sum.Archives[1].Report != nil || !strings.HasPrefix(sum.Worst(), "junk.sofa: ") {
		t.Fatalf("damaged: %+v (%q), %v", sum, sum.Worst(), err)
	}
	// Two full archives are no chain: refused, with an *OptionError.
	var oe *sofa.OptionError
	if _, err := sofa.VerifyChain(ctx, open("sound.sofa", "cut.sofa")...); !errors.As(err, &oe) {
		t.Fatalf("VerifyChain of two full archives: %v, want an *OptionError", err)
	}
}
