package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestCLI_BackupArchiveVersion: a backup writes format version 3 (each
// database one pack member here), --archive-version 2 the layout older
// releases read (every member on its own), both restore equal; another
// version is refused before the source is read.
func TestCLI_BackupArchiveVersion(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "one", true, arSmallDocs("o", 20)...)
	arCreate(t, src, "two", true, arSmallDocs("t", 5)...)
	dir := t.TempDir()
	for _, c := range []struct {
		args    []string
		version int
		member  string // a member name of database one
	}{
		{nil, 3, "db/one/pack-000001.tar.zst"},
		{[]string{"--archive-version", "2"}, 2, "db/one/docs-000001.ndjson.zst"},
	} {
		path := filepath.Join(dir, "v"+string(rune('0'+c.version))+".sofa")
		args := append([]string{"backup", src.URL, path, "-q", "--include", "one", "--include", "two"}, c.args...)
		arSofa(t, bin, nil, args...).want(t, exitOK)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := archive.List(bytes.NewReader(data))
		if err != nil || h.Version != c.version {
			t.Fatalf("%v: version %d (%v), want %d", c.args, h.Version, err, c.version)
		}
		names := memberNames(t, data)
		found := false
		for _, n := range names {
			found = found || n == c.member
		}
		if !found {
			t.Errorf("%v: members %v, want %s among them", c.args, names, c.member)
		}
		arSofa(t, bin, nil, "verify", path, src.URL, "--include", "one", "--include", "two").want(t, exitOK)
	}
	r := arSofa(t, bin, nil, "backup", src.URL, filepath.Join(dir, "v4.sofa"), "--archive-version", "4")
	r.want(t, exitUsage)
	if !strings.Contains(r.stderr, "--archive-version 4") {
		t.Errorf("stderr %q does not name --archive-version 4", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "v4.sofa")); !os.IsNotExist(err) {
		t.Errorf("refused backup left a file: %v", err)
	}
}
