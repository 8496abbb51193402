package sofa_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/storage"
)

// raceStore is storage.Local whose writers find their name taken when
// they commit: another run wrote it meanwhile (what two backups to one
// name, started together, meet).
type raceStore struct{ storage.Local }

func (s raceStore) Create(ctx context.Context, name string, o storage.CreateOptions) (storage.Writer, error) {
	w, err := s.Local.Create(ctx, name, o)
	if err != nil {
		return nil, err
	}
	return raceWriter{Writer: w, name: name}, nil
}

type raceWriter struct {
	storage.Writer
	name string
}

func (w raceWriter) Commit() error {
	if err := os.WriteFile(w.name, []byte("the other run's archive"), 0o600); err != nil {
		return err
	}
	return w.Writer.Commit()
}

// TestBackup_NameTakenMeanwhile: a backup whose archive name was taken
// by another run while it ran fails with ErrWrittenMeanwhile, not
// storage.ErrExist in an *OptionError (a usage error: exit 2 after all
// the work, which a new user met), and the other run's archive stays.
func TestBackup_NameTakenMeanwhile(t *testing.T) {
	srv := couchtest.Start(t)
	seed(t, srv, "m1", 3)
	path := filepath.Join(t.TempDir(), "x.sofa")
	_, err := sofa.Backup(t.Context(), openAt(t, srv.URL, nil), openAt(t, path, raceStore{}), sofa.BackupOptions{})
	var oe *sofa.OptionError
	if !errors.Is(err, sofa.ErrWrittenMeanwhile) || errors.Is(err, storage.ErrExist) || errors.As(err, &oe) {
		t.Fatalf("backup: %v; want ErrWrittenMeanwhile, no ErrExist, no *OptionError", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "the other run's archive" {
		t.Errorf("the other run's archive: %q, %v", b, err)
	}
}
