package archive

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// openSpools counts this process's open file descriptors on spool files
// in dir (unlinked: their links read "dir/sofa-spool-... (deleted)").
func openSpools(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd to count open files:", err)
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(l, filepath.Join(dir, "sofa-spool-")) {
			n++
		}
	}
	return n
}

// TestStream_LineKeepsFewFilesOpen: databases closed while another owns
// the stream wait in line; beyond maxHeldSpools of them, their groups
// move into one parking file instead of each keeping its spool open (a
// 300-database backup into a slow stream failed under a 200 file
// limit), emptied once the line is written. Every group still reaches
// the archive, in line order, whole.
func TestStream_LineKeepsFewFilesOpen(t *testing.T) {
	const waiting = 3*maxHeldSpools + 5
	tmp := t.TempDir()
	var sink lockedBuffer
	w, err := NewWriter(&sink, Options{TempDir: tmp, Compression: None, Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	owner, _ := w.Database("owner")
	mustWrite(t, owner, doc("o", "1-o", false, `{"_id":"o"}`))
	want := []string{owner.dir}
	shared := bytes.Repeat([]byte("s"), 3000) // stored by the first group in line only
	for i := range waiting {
		d, _ := w.Database(fmt.Sprintf("db%04d", i))
		id := fmt.Sprintf("d%04d", i)
		mustWrite(t, d, doc(id, "1-"+id, false, fmt.Sprintf(`{"_id":%q,"n":%d}`, id, i), att("s", "x/y", "", shared, int64(len(shared)), 1)))
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		want = append(want, d.dir)
	}
	if n := openSpools(t, tmp); n > maxHeldSpools+1 {
		t.Errorf("%d spool files open with %d databases in line, want at most %d (and the parking file)", n, waiting, maxHeldSpools)
	}
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := w.parking.file.Stat(); err != nil {
		t.Fatal(err)
	} else if st.Size() != 0 {
		t.Errorf("the parking file holds %d bytes once the line is written, want it emptied", st.Size())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := openSpools(t, tmp); n != 0 {
		t.Errorf("%d spool files still open after Close", n)
	}
	data := sink.b.Bytes()
	order, blobs := groupOrder(t, data)
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("groups in order %v, want %v", order, want)
	}
	if len(blobs) != 1 {
		t.Errorf("%d blobs stored, want the shared one once", len(blobs))
	}
	if _, err := Verify(bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}
	_, got := readArchive(t, data)
	for i := range waiting {
		name := fmt.Sprintf("db%04d", i)
		g := got[name]
		if len(g.docs) != 1 || !bytes.Contains(g.docs[0].Body, []byte(fmt.Sprintf(`"n":%d}`, i))) || !bytes.Equal(g.docs[0].Atts[0].Data, shared) {
			t.Fatalf("%s read back as %+v", name, g.docs)
		}
	}
}
