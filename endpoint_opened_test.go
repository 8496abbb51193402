package sofa_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/sofadb/sofa"
)

// TestEndpoint_NotOpenedRefused: every call that takes endpoints refuses
// one that sofa.Open did not return (nil, or a zero Endpoint) with an
// *OptionError, without a panic.
func TestEndpoint_NotOpenedRefused(t *testing.T) {
	ctx := t.Context()
	good := openAt(t, filepath.Join(t.TempDir(), "a.sofa"), nil)
	for _, bad := range []*sofa.Endpoint{nil, {}} {
		calls := map[string]func() error{
			"Verify":   func() error { _, err := sofa.Verify(ctx, bad, good, sofa.VerifyOptions{}); return err },
			"Verify b": func() error { _, err := sofa.Verify(ctx, good, bad, sofa.VerifyOptions{}); return err },
			"Copy":     func() error { _, err := sofa.Copy(ctx, bad, good, sofa.CopyOptions{}); return err },
			"CopyDB":   func() error { _, err := sofa.CopyDB(ctx, good, bad, sofa.CopyDBOptions{}); return err },
			"Sync":     func() error { _, err := sofa.Sync(ctx, bad, good, sofa.SyncOptions{}); return err },
			"Backup":   func() error { _, err := sofa.Backup(ctx, bad, good, sofa.BackupOptions{}); return err },
			"Restore": func() error {
				_, err := sofa.Restore(ctx, []*sofa.Endpoint{bad}, good, sofa.RestoreOptions{})
				return err
			},
			"Restore dst": func() error {
				_, err := sofa.Restore(ctx, []*sofa.Endpoint{good}, bad, sofa.RestoreOptions{})
				return err
			},
			"List":          func() error { _, err := sofa.List(ctx, bad); return err },
			"ListArchive":   func() error { _, _, err := sofa.ListArchive(ctx, bad); return err },
			"CheckArchive":  func() error { _, err := sofa.CheckArchive(ctx, bad); return err },
			"CheckArchives": func() error { _, err := sofa.CheckArchives(ctx, bad); return err },
			"VerifyChain":   func() error { _, err := sofa.VerifyChain(ctx, good, bad); return err },
		}
		for name, call := range calls {
			var oe *sofa.OptionError
			if err := call(); !errors.As(err, &oe) {
				t.Errorf("%s with %#v: %v, want an *OptionError", name, bad, err)
			}
		}
	}
}
