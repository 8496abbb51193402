package dataset

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nodeModules returns the repository's node_modules holding the pinned data
// packages, or skips the test when they are not installed (npm ci not run).
func nodeModules(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{pkgCities, pkgCountries, pkgFlags, pkgEmoji} {
		if _, err := os.Stat(filepath.Join(dir, p, "package.json")); err != nil {
			t.Skipf("npm package %s not installed (run npm ci at the repository root): %v", p, err)
		}
	}
	return dir
}

func TestRealCounts(t *testing.T) {
	nm := nodeModules(t)
	dbs, err := Real(nm, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 250 countries + cities + emoji, pinned package versions.
	if got := len(dbs); got != 252 {
		t.Fatalf("%d databases, want 252", got)
	}
	byName := map[string]DB{}
	total := 0
	for _, db := range dbs {
		byName[db.Name] = db
		total += db.Revs
	}
	if got := byName["cities"].Revs; got != 171_075 {
		t.Errorf("cities: %d docs, want 171,075", got)
	}
	if got := byName["emoji"].Revs; got != 1911+4 {
		t.Errorf("emoji: %d docs, want 1,915", got)
	}
	if got := total; got != 344_315 {
		t.Errorf("real set: %d revisions, want 344,315", got)
	}
}

func TestCountries(t *testing.T) {
	nm := nodeModules(t)
	dbs, err := Countries(nm, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var fr DB
	for _, db := range dbs {
		if db.Name == "country-fr" {
			fr = db
		}
	}
	if fr.Name == "" {
		t.Fatal("no country-fr")
	}
	docs, _ := collect(t, fr)
	c := docs[0]
	if c.ID != "country" || c.Type != "country" {
		t.Fatalf("first doc %q type %q", c.ID, c.Type)
	}
	flag := c.Attachments["flag.svg"]
	svg, err := base64.StdEncoding.DecodeString(flag.Data)
	if err != nil || flag.ContentType != "image/svg+xml" || !strings.Contains(string(svg), "<svg") {
		t.Errorf("flag.svg: %q, %d bytes, %v", flag.ContentType, len(svg), err)
	}
	if len(docs) < 1000 {
		t.Errorf("country-fr has %d docs", len(docs))
	}
	for _, d := range docs[1:] {
		if !strings.HasPrefix(d.ID, "city-") || d.Type != "city" {
			t.Fatalf("doc %q type %q", d.ID, d.Type)
		}
	}

	small, err := Countries(nm, Options{Scale: 0.01, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(small) != 2 || small[0].Name != "country-ad" {
		t.Errorf("scaled: %d dbs, first %q", len(small), small[0].Name)
	}
}

func TestEmojiScaled(t *testing.T) {
	nm := nodeModules(t)
	db, err := Emoji(nm, Options{Scale: 0.005})
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := collect(t, db)
	if got := len(docs); got != 10+1 {
		t.Fatalf("%d docs, want 11", got)
	}
	if !strings.HasPrefix(docs[0].ID, "emoji-") || docs[0].Attachments["64.png"].ContentType != "image/png" {
		t.Errorf("first emoji doc %+v", docs[0].ID)
	}
	sheet := docs[len(docs)-1]
	png, _ := base64.StdEncoding.DecodeString(sheet.Attachments["sheet.png"].Data)
	if sheet.ID != "sheet-16" || len(png) < 1<<20 || string(png[1:4]) != "PNG" {
		t.Errorf("sheet %q: %d bytes", sheet.ID, len(png))
	}
}
