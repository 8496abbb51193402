package archive

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

// TestBlobOfCompressedTypeNotCompressed: a blob whose content type names
// compressed bytes (a PNG, a zip, a video) is stored as is without
// trying, even when zstd would have shrunk it; the same bytes under
// another type are compressed; both read back equal.
func TestBlobOfCompressedTypeNotCompressed(t *testing.T) {
	png := bytes.Repeat([]byte("png!"), 4096)
	txt := bytes.Repeat([]byte("text"), 4096)
	docs := map[string][]*replicate.Doc{"d": {
		doc("a", "1-a", false, `{"_id":"a"}`, att("a.png", "Image/PNG; x=y", "", png, int64(len(png)), 1)),
		doc("b", "1-b", false, `{"_id":"b"}`, att("b.mp4", "video/mp4", "", append([]byte("v"), png...), int64(len(png)+1), 1)),
		doc("c", "1-c", false, `{"_id":"c"}`, att("c.txt", "text/plain", "", txt, int64(len(txt)), 1)),
	}}
	data := writeArchive(t, Options{Version: 2}, docs, []string{"d"})
	var raw, zst int
	for _, name := range memberNames(t, data) {
		if strings.HasPrefix(name, "blob/") {
			if strings.HasSuffix(name, ".zst") {
				zst++
			} else {
				raw++
			}
		}
	}
	if raw != 2 || zst != 1 {
		t.Errorf("%d blobs stored as is and %d compressed, want the PNG and the video as is, the text compressed", raw, zst)
	}
	_, got := readArchive(t, data)
	for _, d := range got["d"].docs {
		want := map[string][]byte{"a": png, "b": append([]byte("v"), png...), "c": txt}[d.ID]
		if len(d.Atts) != 1 || !bytes.Equal(d.Atts[0].Data, want) {
			t.Errorf("%s read back with other bytes", d.ID)
		}
	}
	for ct, want := range map[string]bool{"image/jpeg": true, " IMAGE/JPEG ;q=1": true, "application/vnd.openxmlformats-officedocument.wordprocessingml.document": true,
		"image/svg+xml": false, "application/octet-stream": false, "": false, "text/html": false, "application/pdf": false} {
		if compressedType(ct) != want {
			t.Errorf("compressedType(%q) = %v, want %v", ct, !want, want)
		}
	}
}

// TestCompressibleProbe: a blob of random bytes (as an encrypted or
// compressed file under a generic type) is judged not worth compressing
// by the fast probe, however long (it runs window by window); text is;
// blobs under probeMin are always tried.
func TestCompressibleProbe(t *testing.T) {
	random := make([]byte, 3<<20+12345)
	if _, err := rand.Read(random); err != nil {
		t.Fatal(err)
	}
	text := bytes.Repeat([]byte(`{"name":"Andorra la Vella","lat":42.5}`), 2000)
	mixed := append(append([]byte{}, random[:1<<20]...), text...) // 7% text
	for name, c := range map[string]struct {
		data []byte
		want bool
	}{
		"random 3 MiB": {random, false}, "random 64 KiB": {random[:64<<10], false},
		"random under probeMin": {random[:probeMin-1], true}, "text": {text, true}, "random then text": {mixed, true},
	} {
		if got := compressible(c.data); got != c.want {
			t.Errorf("%s: compressible = %v, want %v", name, got, c.want)
		}
	}
}
