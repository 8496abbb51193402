//go:build unix

package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// An archive path that is a directory or a named pipe, given to a verb
// that reads an archive: a usage error naming what it is, at once (a new
// user saw `restore` of a named pipe hang, writing nothing, through a
// SIGTERM; and a directory called a malformed archive, exit 1).
func TestCLI_ArchiveNotAFile(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	dir := t.TempDir()
	d := filepath.Join(dir, "d.sofa")
	p := filepath.Join(dir, "p.sofa")
	if err := syscall.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, want string
	}{{d, "is a directory"}, {p, "give - and pipe the archive to stdin"}} {
		for _, args := range [][]string{{"restore", c.path, srv.URL}, {"verify", c.path}, {"ls", c.path}, {"backup", srv.URL, filepath.Join(dir, "x.sofa"), "--since", c.path}} {
			r := arSofa(t, bin, nil, args...)
			if line := r.errLine(t); r.code != exitUsage || !strings.Contains(line, c.want) || strings.Contains(line, "malformed") {
				t.Errorf("sofa %s: exit %d, %q; want 2 saying %q", strings.Join(args, " "), r.code, line, c.want)
			}
		}
	}
}
