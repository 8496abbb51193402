package dataset

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
)

type testDoc struct {
	ID        string `json:"_id"`
	Rev       string `json:"_rev"`
	Deleted   bool   `json:"_deleted"`
	Revisions struct {
		Start int      `json:"start"`
		IDs   []string `json:"ids"`
	} `json:"_revisions"`
	Attachments map[string]struct {
		ContentType string `json:"content_type"`
		Data        string `json:"data"`
	} `json:"_attachments"`
	Type string `json:"type"`
}

// collect returns every revision of db, decoded and raw.
func collect(t *testing.T, db DB) ([]testDoc, [][]byte) {
	t.Helper()
	var docs []testDoc
	var raws [][]byte
	err := db.Each(func(rev []byte) error {
		var d testDoc
		if err := json.Unmarshal(rev, &d); err != nil {
			t.Fatalf("revision is not JSON: %v: %.200s", err, rev)
		}
		docs = append(docs, d)
		raws = append(raws, bytes.Clone(rev))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(docs), db.Revs; got != want {
		t.Fatalf("Each yielded %d revisions, Revs says %d", got, want)
	}
	return docs, raws
}

func TestSynth_Deterministic(t *testing.T) {
	s := Synth{Name: "d", Docs: 20, MinSize: 200, MaxSize: 900, Atts: []int{5, 1000}, Depth: 2,
		ConflictEvery: 3, Conflicts: 2, DeleteEvery: 4, Seed: 7}
	_, a := collect(t, s.DB())
	_, b := collect(t, s.DB())
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("revision %d differs between runs", i)
		}
	}
	s.Seed = 8
	_, c := collect(t, s.DB())
	if bytes.Equal(a[0], c[0]) {
		t.Fatal("a different seed gave the same bytes")
	}
}

func TestSynth_Shapes(t *testing.T) {
	s := Synth{Name: "shapes", Docs: 12, MinSize: 1000, Atts: []int{30, 4096}, Depth: 3,
		ConflictEvery: 4, Conflicts: 2, DeleteEvery: 5}
	docs, raws := collect(t, s.DB())
	if got, want := len(docs), 12+3*2; got != want {
		t.Fatalf("got %d revisions, want %d", got, want)
	}
	leaves := map[string][]testDoc{}
	for i, d := range docs {
		leaves[d.ID] = append(leaves[d.ID], d)
		if got, want := len(d.Revisions.IDs), d.Revisions.Start; got != want {
			t.Errorf("%s %s: %d ids for start %d", d.ID, d.Rev, got, want)
		}
		if want := d.Revisions.IDs[0]; d.Rev[len(d.Rev)-32:] != want {
			t.Errorf("%s: _rev %s does not end with %s", d.ID, d.Rev, want)
		}
		if d.Deleted {
			if len(d.Attachments) != 0 || d.Revisions.Start != 4 {
				t.Errorf("tombstone %s: %d attachments, gen %d", d.ID, len(d.Attachments), d.Revisions.Start)
			}
			continue
		}
		if d.Type != "synthetic" {
			t.Errorf("%s: type %q", d.ID, d.Type)
		}
		if d.Revisions.Start != 3 {
			t.Errorf("%s: gen %d, want 3", d.ID, d.Revisions.Start)
		}
		// Body size excludes the envelope: measure the raw revision minus
		// the envelope and attachments loosely.
		if len(raws[i]) < 1000 {
			t.Errorf("%s: revision only %d bytes", d.ID, len(raws[i]))
		}
	}
	// Document 0 has two conflicts sharing the first two ancestors.
	l0 := leaves["doc-00000000"]
	if len(l0) != 3 {
		t.Fatalf("doc-00000000 has %d leaves, want 3", len(l0))
	}
	for _, c := range l0[1:] {
		if c.Rev == l0[0].Rev || c.Revisions.IDs[1] != l0[0].Revisions.IDs[1] || c.Revisions.IDs[2] != l0[0].Revisions.IDs[2] {
			t.Errorf("conflict %s does not branch off %s's parent", c.Rev, l0[0].Rev)
		}
	}
	// Document 4 (5th) is a tombstone; document 1 is live with attachments.
	if d := leaves["doc-00000004"][0]; !d.Deleted {
		t.Errorf("doc-00000004 is not deleted")
	}
	d1 := leaves["doc-00000001"][0]
	a1, err := base64.StdEncoding.DecodeString(d1.Attachments["a1.bin"].Data)
	if err != nil || len(a1) != 4096 || d1.Attachments["a1.bin"].ContentType != "application/octet-stream" {
		t.Errorf("a1.bin: %d bytes, err %v", len(a1), err)
	}
}

func TestSynth_BodySize(t *testing.T) {
	s := Synth{Name: "size", Docs: 3, MinSize: 500, MaxSize: 3000}
	for i, want := range []int{500, 1750, 3000} {
		if got := len(s.body(i, 0)); got != want {
			t.Errorf("body %d: %d bytes, want %d", i, got, want)
		}
		if !json.Valid(s.body(i, 0)) {
			t.Errorf("body %d is not JSON", i)
		}
	}
}

func TestPreset(t *testing.T) {
	for _, name := range Presets() {
		s, ok := Preset(name, 0.001)
		if !ok || s.Name != name || s.Docs < 1 {
			t.Errorf("Preset(%q) = %+v, %v", name, s, ok)
		}
	}
	if s, _ := Preset(PresetAtts, 1); s.Docs != 110 || len(s.Atts) != 3 || s.Atts[2] != 2<<20 {
		t.Errorf("atts_db = %+v", s)
	}
	if s, _ := Preset(PresetAtts, 10); s.Docs != 1100 {
		t.Errorf("atts_db at scale 10 has %d docs, want the full-size shape's 1,100 (see Preset)", s.Docs)
	}
	if s, _ := Preset(PresetLarge1KB, 0.5); s.Docs != 170_649 {
		t.Errorf("large1kb at 0.5 = %d docs", s.Docs)
	}
	if _, ok := Preset("nope", 1); ok {
		t.Error("unknown preset accepted")
	}
}

func TestOptionsKeep(t *testing.T) {
	for _, c := range []struct {
		o       Options
		n, want int
	}{
		{Options{}, 10, 10},
		{Options{Scale: 0.25}, 10, 3},
		{Options{Scale: 0.0001}, 10, 1},
		{Options{Scale: 2}, 10, 10},
		{Options{Limit: 4}, 10, 4},
		{Options{Scale: 0.5, Limit: 4}, 100, 4},
		{Options{Scale: 0.5}, 0, 0},
	} {
		if got := c.o.keep(c.n); got != c.want {
			t.Errorf("%+v.keep(%d) = %d, want %d", c.o, c.n, got, c.want)
		}
	}
}

func TestRevisionEncode(t *testing.T) {
	r := revision{ID: `a"b`, Gen: 2, Hashes: []string{"h2", "h1"}, Body: []byte(` {"x":1} `),
		Atts: []att{{Name: "f.txt", ContentType: "text/plain", Data: []byte("hi")}}}
	got, err := r.encode()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"_id":"a\"b","_rev":"2-h2","_revisions":{"start":2,"ids":["h2","h1"]},"_attachments":{"f.txt":{"content_type":"text/plain","data":"aGk="}},"x":1}`
	if string(got) != want {
		t.Errorf("encode:\n got %s\nwant %s", got, want)
	}
	if _, err := (&revision{ID: "x", Gen: 1, Hashes: []string{"h"}, Body: []byte(`[1]`)}).encode(); err == nil {
		t.Error("array body accepted")
	}
	if _, err := (&revision{ID: "x", Gen: 1}).encode(); err == nil {
		t.Error("revision without history accepted")
	}
	empty, err := (&revision{ID: "x", Gen: 1, Hashes: []string{"h"}, Body: []byte(`{}`)}).encode()
	if err != nil || string(empty) != `{"_id":"x","_rev":"1-h","_revisions":{"start":1,"ids":["h"]}}` {
		t.Errorf("empty body: %s, %v", empty, err)
	}
}
