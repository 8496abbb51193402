package sofa_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/archive"
)

// TestBackup_LocalOptionsCheckedFirst: an unknown Compression and a
// TempDir that is missing or a file are refused with an *OptionError
// before the source is asked anything (the source here is no server at
// all: asking it would fail otherwise).
func TestBackup_LocalOptionsCheckedFirst(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	src := openAt(t, filepath.Join(dir, "src.sofa"), nil) // never read: refused first
	for what, o := range map[string]sofa.BackupOptions{
		"unknown compression": {Compression: archive.Compression("bogus")},
		"missing TempDir":     {TempDir: filepath.Join(dir, "none")},
		"TempDir a file":      {TempDir: file},
	} {
		_, err := sofa.Backup(ctx, src, openAt(t, filepath.Join(dir, "out.sofa"), nil), o)
		var oe *sofa.OptionError
		if !errors.As(err, &oe) || strings.Contains(err.Error(), "src.sofa") {
			t.Errorf("%s: %v, want an *OptionError before the source is read", what, err)
		}
	}
}
