package archive

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

// failAfter reads r until n bytes were given, then fails with err (a
// storage that loses its connection).
type failAfter struct {
	r   io.Reader
	n   int
	err error
}

func (f *failAfter) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, f.err
	}
	if len(p) > f.n {
		p = p[:f.n]
	}
	k, err := f.r.Read(p)
	f.n -= k
	return k, err
}

// TestReadFailureIsNoDamage: the storage failing to give an archive's
// bytes (a lost S3 connection, an I/O error), inside a member or between
// two, is no damage of the archive: the error keeps its cause and is no
// *Error (a new user read "malformed archive" for a restore whose S3
// server went away, and took a sound archive for damaged).
func TestReadFailureIsNoDamage(t *testing.T) {
	data := writeArchive(t, Options{}, map[string][]*replicate.Doc{"db": sampleDocs()}, []string{"db"})
	lost := errors.New("dial tcp 127.0.0.1:9: connect: connection refused")
	for _, n := range []int{1024 + 100, 3 * 1024, len(data) / 2} {
		rd, err := NewReader(&failAfter{r: bytes.NewReader(data), n: n, err: lost}, nil)
		if err == nil {
			for {
				var db *DBReader
				db, err = rd.Next()
				if err != nil {
					break
				}
				if err = db.Changes(context.Background(), nil, func(replicate.Change) error { return nil }); err != nil {
					break
				}
			}
			rd.Close()
		}
		var ae *Error
		if !errors.Is(err, lost) || errors.As(err, &ae) {
			t.Errorf("read failing after %d bytes: %v; want the cause, and no *Error", n, err)
		}
	}
}
