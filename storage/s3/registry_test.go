package s3

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRegistryKeepsToTMPDIR: the upload registry is made inside TMPDIR,
// never TMPDIR itself: a TMPDIR that does not exist stays so (a writer
// running as root created /nonexistent/sofa-s3-uploads); the upload goes
// unregistered (best effort), and the registry is used where TMPDIR is.
func TestRegistryKeepsToTMPDIR(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "gone")
	t.Setenv("TMPDIR", gone)
	w := &writer{bucket: "b", key: "k", uploadID: "u"}
	w.register()
	defer w.unregister()
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("TMPDIR %s was created (%v)", gone, err)
	}
	there := t.TempDir()
	t.Setenv("TMPDIR", there)
	w2 := &writer{bucket: "b", key: "k", uploadID: "u2"}
	w2.register()
	defer w2.unregister()
	if w2.reg == nil {
		t.Skip("no flock on this system")
	}
	if _, err := os.Stat(filepath.Join(there, "sofa-s3-uploads")); err != nil {
		t.Errorf("registry not made in TMPDIR: %v", err)
	}
}
