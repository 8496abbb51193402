package sofa_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/replicate"
)

// TestNegativeOptionsRefused: negative counts, sizes and durations whose
// docs give zero and positive values only are refused with an
// *OptionError before anything is read (they were taken silently).
func TestNegativeOptionsRefused(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	arch := openAt(t, filepath.Join(dir, "a.sofa"), nil) // never read: refused first
	out := openAt(t, filepath.Join(dir, "b.sofa"), nil)
	var oe *sofa.OptionError
	refused := func(what string, err error) {
		t.Helper()
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), "want 0") {
			t.Errorf("%s: %v, want an *OptionError naming the value", what, err)
		}
	}
	for what, rc := range map[string]sofa.RunControl{
		"MaxDBs": {MaxDBs: -1}, "IdealDuration": {IdealDuration: -time.Second},
	} {
		_, err := sofa.Backup(ctx, arch, out, sofa.BackupOptions{RunControl: rc})
		refused("backup with negative "+what, err)
		_, err = sofa.Restore(ctx, []*sofa.Endpoint{arch}, out, sofa.RestoreOptions{RunControl: rc})
		refused("restore with negative "+what, err)
	}
	for what, e := range map[string]replicate.Options{
		"Workers": {Workers: -1}, "BatchSize": {BatchSize: -1}, "WriteBatchBytes": {WriteBatchBytes: -1},
	} {
		_, err := sofa.Backup(ctx, arch, out, sofa.BackupOptions{Engine: e})
		refused("backup with negative "+what, err)
	}
	_, err := sofa.Restore(ctx, []*sofa.Endpoint{arch}, out, sofa.RestoreOptions{N: -1})
	refused("restore with negative N", err)
	_, err = sofa.Open(ctx, "http://127.0.0.1:1", sofa.OpenOptions{Limit: sofa.LimitOptions{MaxRequests: -1}})
	refused("Open with negative MaxRequests", err)
}
