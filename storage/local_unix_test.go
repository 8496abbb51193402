//go:build unix

package storage

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Temporary archive files: a writer flocks its .NAME.tmp-HEX for its whole
// life, and the next Create of NAME removes every such file it can lock
// (the leftover of a killed writer) and keeps those it cannot (a running
// writer's).

// localSink is a Local writer with the stale files its Create removed.
type localSink struct {
	*localWriter
	stale []string
}

func createLocal(t *testing.T, path string, overwrite bool) (*localSink, error) {
	t.Helper()
	s := &localSink{}
	w, err := Local{}.Create(context.Background(), path, CreateOptions{Overwrite: overwrite, OnStale: func(p string) { s.stale = append(s.stale, p) }})
	if err != nil {
		return nil, err
	}
	s.localWriter = w.(*localWriter)
	return s, nil
}

// tempNames lists the temporary archive files of final name base in dir.
func tempNames(t *testing.T, dir, base string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "."+base+".tmp-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// lockedFile creates path and holds its flock until the test ends.
func lockedFile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := lockTemp(f); err != nil {
		t.Fatal(err)
	}
}

// TestTemp_StaleRemovedLockedKept, at function level: createArchive
// removes an unlocked leftover, keeps a locked one and every file not named
// exactly like a temporary file of this final name, holds the lock on its
// own file, and Commit leaves no temporary file of its own.
func TestTemp_StaleRemovedLockedKept(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.sofa")
	stale := filepath.Join(dir, ".x.sofa.tmp-aabbccddeeff")
	if err := os.WriteFile(stale, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyStale := filepath.Join(dir, ".x.sofa.tmp-000000000000")
	if err := os.WriteFile(emptyStale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	held := filepath.Join(dir, ".x.sofa.tmp-112233445566")
	lockedFile(t, held)
	keep := []string{
		".x.sofa.tmp-notes.txt",     // not hex
		".y.sofa.tmp-aabbccddeeff",  // another final name
		"x.sofa.tmp-aabbccddeeff",   // not hidden
		".x.sofa.tmp-",              // no suffix
		".xx.sofa.tmp-aabbccddeeff", // another final name sharing a prefix
	}
	for _, n := range keep {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	sink, err := createLocal(t, path, false)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(sink.stale)
	if want := []string{emptyStale, stale}; !slices.Equal(sink.stale, want) {
		t.Errorf("removed %q, want %q", sink.stale, want)
	}
	for _, p := range []string{stale, emptyStale} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("stale %s not removed", filepath.Base(p))
		}
	}
	if _, err := os.Stat(held); err != nil {
		t.Errorf("locked temporary file removed: %v", err)
	}
	for _, n := range keep {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("unrelated file %s removed: %v", n, err)
		}
	}
	// The sink's own file is locked: a second scan (another backup) keeps it.
	if got := removeStaleTemps(path); len(got) != 0 {
		t.Errorf("a second scan removed %q while the sink is open", got)
	}
	if _, err := os.Stat(sink.tmp); err != nil {
		t.Fatalf("own temporary file: %v", err)
	}
	if _, err := sink.Write([]byte("archive")); err != nil {
		t.Fatal(err)
	}
	if err := sink.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "archive" {
		t.Fatalf("final file %q, %v", b, err)
	}
	if got := tempNames(t, dir, "x.sofa"); !slices.Equal(got, []string{".x.sofa.tmp-", ".x.sofa.tmp-112233445566", ".x.sofa.tmp-notes.txt"}) {
		t.Errorf("temporary files after commit: %q", got)
	}

	// Abort removes the own file too; the held one survives again.
	sink, err = createLocal(t, path, true)
	if err != nil {
		t.Fatal(err)
	}
	sink.Abort()
	if _, err := os.Stat(sink.tmp); err == nil {
		t.Error("abort left its temporary file")
	}
	if _, err := os.Stat(held); err != nil {
		t.Errorf("locked temporary file removed: %v", err)
	}
}
