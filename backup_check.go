package sofa

import (
	"fmt"
	"os"

	"github.com/sofadb/sofa/archive"
)

// checkLocal refuses, as an *OptionError and before any server is
// asked, a Compression no archive has and a TempDir that is no
// directory (found only when a database first spooled, part way
// through a whole-server backup).
func (o BackupOptions) checkLocal() error {
	if err := checkRun(o.RunControl, o.Engine, 0, 0); err != nil {
		return err
	}
	if _, err := archive.ParseCompression(string(o.Compression)); err != nil {
		return &OptionError{Err: err}
	}
	if err := checkArchiveVersion(o.ArchiveVersion); err != nil {
		return err
	}
	if o.TempDir == "" {
		return nil
	}
	fi, err := os.Stat(o.TempDir)
	if err == nil && !fi.IsDir() {
		err = fmt.Errorf("not a directory")
	}
	if err != nil {
		return optionErr("temporary directory %s: %w", o.TempDir, err)
	}
	return nil
}

// checkArchiveVersion refuses a format version no writer writes, as an
// *OptionError (--archive-version).
func checkArchiveVersion(v int) error {
	if v != 0 && v != 2 && v != archive.FormatVersion {
		return optionErr("--archive-version %d: sofa writes archive format versions 2 and %d", v, archive.FormatVersion)
	}
	return nil
}
