package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestRemoveLiveTemps: a process about to exit without aborting its
// writers (a second SIGINT) removes the temporary files of the archives
// it is writing, and only those: a committed archive stays.
func TestRemoveLiveTemps(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	open := Local{}
	done, err := open.Create(ctx, filepath.Join(dir, "done.sofa"), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done.Write([]byte("x"))
	if err := done.Commit(); err != nil {
		t.Fatal(err)
	}
	w, err := open.Create(ctx, filepath.Join(dir, "live.sofa"), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	w.Write([]byte("y"))
	removed := RemoveLiveTemps()
	if len(removed) != 1 || filepath.Clean(filepath.Dir(removed[0])) != filepath.Clean(dir) {
		t.Errorf("removed %v, want the live writer's temporary file", removed)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 1 || left[0].Name() != "done.sofa" {
		t.Errorf("left %v, want done.sofa alone", left)
	}
}

// TestCreateStdoutDevice: an archive is not written to a stdout that is a
// terminal or a device (/dev/null, where a closed stdout points): it
// would be lost while the run says it was written.
func TestCreateStdoutDevice(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if _, err := (Local{Stdout: null}).Create(t.Context(), Stdio, CreateOptions{}); !errors.Is(err, ErrStdoutDevice) {
		t.Errorf("Create(-) onto %s: %v, want ErrStdoutDevice", os.DevNull, err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := (Local{Stdout: f}).Create(t.Context(), Stdio, CreateOptions{})
	if err != nil {
		t.Fatalf("Create(-) onto a file: %v", err)
	}
	w.Abort()
}
