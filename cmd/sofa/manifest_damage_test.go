package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// flipInManifest returns data with one byte of manifest.json's content
// flipped: the member's tar header (a ustar block named manifest.json)
// and every other member are left as they were, so only its checksum
// can tell.
func flipInManifest(t *testing.T, data []byte) []byte {
	t.Helper()
	for p := 0; p+1024 <= len(data); p += 512 {
		// manifest.json.zst in format version 3, manifest.json before
		named := bytes.HasPrefix(data[p:], []byte("manifest.json.zst\x00")) || bytes.HasPrefix(data[p:], []byte("manifest.json\x00"))
		if named && data[p+156] == '0' {
			out := bytes.Clone(data)
			out[p+512+20] ^= 0x20
			return out
		}
	}
	t.Fatal("no manifest.json member")
	return nil
}

// TestRestore_DamagedManifestSelected (conformance C1): an archive file
// whose manifest holds a flipped byte, restored with a selection that
// leaves databases out (only their groups are read at their offsets),
// restores the selected one and exits 1 naming the manifest; so does a
// verify of that selection. Before, such a restore read the selected
// groups only, never the manifest, and exited 0.
func TestRestore_DamagedManifestSelected(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	for _, db := range []string{"keep", "other"} {
		arCreate(t, src, db, true, arSmallDocs(db+"-", 20)...)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.sofa")
	arSofa(t, bin, nil, "backup", src.URL, good, "-q").want(t, exitOK)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.sofa")
	if err := os.WriteFile(bad, flipInManifest(t, data), 0o600); err != nil {
		t.Fatal(err)
	}
	tgt := couchtest.Start(t)
	r := arSofa(t, bin, nil, "restore", bad, tgt.URL, "--include", "keep")
	r.want(t, exitFatal)
	if !strings.Contains(r.stderr, `"manifest.json`) {
		t.Errorf("the error does not name the damaged manifest:\n%s", r.stderr)
	}
	arEqual(t, src, "keep", tgt, "keep")
	v := arSofa(t, bin, nil, "verify", bad, "--include", "keep")
	v.want(t, exitFatal)
	if !strings.Contains(v.stderr, `"manifest.json`) {
		t.Errorf("verify --include: the error does not name the damaged manifest:\n%s", v.stderr)
	}
	// The sound archive, the same selection: exit 0 (the flip is what
	// fails it).
	arSofa(t, bin, nil, "verify", good, "--include", "keep").want(t, exitOK)
}
