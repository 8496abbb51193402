package main

import (
	"io"
	"slices"
	"testing"
)

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("30, 41k,2m")
	if err != nil || !slices.Equal(got, []int{30, 41 << 10, 2 << 20}) {
		t.Errorf("parseSizes = %v, %v", got, err)
	}
	for _, bad := range []string{"x", "-1", "1g", ","} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}

func TestParseValidation(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--target", "127.0.0.1:5984"},
		{"--target", "http://h:1", "--scale", "0"},
		{"--target", "http://h:1", "extra"},
	} {
		if _, err := parse(args, io.Discard); err == nil {
			t.Errorf("parse(%q) accepted", args)
		}
	}
	cfg, err := parse([]string{"--target", "http://h:1", "--set", "atts_db", "--scale", "0.1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	dbs, err := sets(cfg)
	if err != nil || len(dbs) != 1 || dbs[0].Name != "atts_db" || dbs[0].Revs != 11 {
		t.Errorf("sets = %+v, %v", dbs, err)
	}
	if code := run([]string{"--target", "http://h:1", "--set", "nope", "--node-modules", t.TempDir()}, io.Discard, io.Discard); code != 2 {
		t.Errorf("unknown set: exit %d, want 2", code)
	}
}
