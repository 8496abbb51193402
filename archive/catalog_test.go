package archive

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

// names are the databases' names.
func names(dbs []DBSummary) []string {
	var out []string
	for _, d := range dbs {
		out = append(out, d.Name)
	}
	return out
}

// TestCatalog: Catalog returns the manifest's databases with the damage
// when only the index or footer after the manifest is damaged (List
// returns the damage alone), and none when the archive is cut short
// before its manifest.
func TestCatalog(t *testing.T) {
	data := goodArchive(t)
	var f footer
	if err := json.Unmarshal(bytes.TrimSpace(data[len(data)-tarTrailer-FooterSize:len(data)-tarTrailer]), &f); err != nil {
		t.Fatal(err)
	}
	badIndex := slices.Clone(data)
	badIndex[f.IndexOffset+f.IndexSize/2] ^= 0x01
	badFooter := slices.Clone(data)
	badFooter[len(data)-tarTrailer-FooterSize+40] ^= 0x01
	for _, c := range []struct {
		name   string
		data   []byte
		member string
	}{{"index", badIndex, indexName}, {"footer", badFooter, footerName}} {
		_, dbs, err := Catalog(bytes.NewReader(c.data))
		if !errors.Is(err, ErrChecksum) || !bytes.Contains([]byte(err.Error()), []byte(c.member)) {
			t.Errorf("damaged %s: Catalog: %v, want a checksum error naming %s", c.name, err, c.member)
		}
		if got := names(dbs); !slices.Equal(got, []string{"alpha", "beta"}) {
			t.Errorf("damaged %s: Catalog's databases %v, want the manifest's [alpha beta]", c.name, got)
		}
		if _, dbs, err := List(bytes.NewReader(c.data)); err == nil || dbs != nil {
			t.Errorf("damaged %s: List: %v, %v; want the damage alone", c.name, names(dbs), err)
		}
	}
	cut := data[:memberOffset(t, data, manifestName)-100]
	if _, dbs, err := Catalog(bytes.NewReader(cut)); !errors.Is(err, ErrTruncated) || dbs != nil {
		t.Errorf("cut before the manifest: Catalog: %v, %v; want ErrTruncated and no database", names(dbs), err)
	}
}

// TestSkim: a Reader stopped by a damaged member of the first group
// reads on to the manifest and names every database; one stopped by the
// archive's end before its manifest cannot; one stopped past the
// manifest (a damaged index) names the groups it read.
func TestSkim(t *testing.T) {
	data := goodArchive(t)
	read := func(data []byte) (*Reader, error) {
		t.Helper()
		rd, err := NewReader(bytes.NewReader(data), nil)
		if err != nil {
			t.Fatal(err)
		}
		for {
			db, err := rd.Next()
			if err != nil {
				return rd, err
			}
			if err := db.drain(); err != nil {
				return rd, err
			}
		}
	}
	bad := slices.Clone(data)
	bad[memberOffset(t, data, "db/alpha/docs-000001.ndjson.zst")+20] ^= 0x01
	rd, err := read(bad)
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("damaged alpha: %v, want ErrChecksum", err)
	}
	if dbs, err := rd.Skim(); err != nil || !slices.Equal(names(dbs), []string{"alpha", "beta"}) {
		t.Errorf("damaged alpha: Skim: %v, %v; want [alpha beta]", names(dbs), err)
	}
	rd.Close()

	rd, err = read(data[:memberOffset(t, data, "db/beta/meta.json")+10])
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("cut in beta: %v, want ErrTruncated", err)
	}
	if dbs, err := rd.Skim(); err == nil {
		t.Errorf("cut in beta: Skim: %v, want an error (nothing after the cut is known)", names(dbs))
	}
	rd.Close()

	var f footer
	if err := json.Unmarshal(bytes.TrimSpace(data[len(data)-tarTrailer-FooterSize:len(data)-tarTrailer]), &f); err != nil {
		t.Fatal(err)
	}
	bad = slices.Clone(data)
	bad[f.IndexOffset+f.IndexSize/2] ^= 0x01
	rd, err = read(bad)
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("damaged index: %v, want ErrChecksum", err)
	}
	if dbs, err := rd.Skim(); err != nil || !slices.Equal(names(dbs), []string{"alpha", "beta"}) {
		t.Errorf("damaged index: Skim: %v, %v; want [alpha beta]", names(dbs), err)
	}
	rd.Close()
}
