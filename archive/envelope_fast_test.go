package archive

import (
	"reflect"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sofadb/sofa/internal/dataset"
	"github.com/sofadb/sofa/replicate"
)

// envelopeCases are bodies whose envelopes the two scanners must agree
// on: escapes, brackets and quotes inside strings, duplicates, odd types
// and whitespace.
var envelopeCases = []string{
	`{}`,
	` { } `,
	`{"_id":"a","_rev":"1-x"}`,
	`{"_id":"a","_rev":"2-y","_revisions":{"start":2,"ids":["y","x"]},"_deleted":true}`,
	"{\n \"_id\" : \"a\" ,\n\t\"_rev\":\"1-x\" , \"v\" : [1, {\"k\": \"}\"}, \"]\"] }\n",
	`{"v":"a \"quoted\" } ] string","_id":"a","_rev":"1-x"}`,
	`{"v":"ends in a backslash \\","_id":"a","_rev":"1-x"}`,
	`{"v":"\\\"","w":"\\\\\"","_id":"a","_rev":"1-x"}`,
	`{"v":{"_id":"inner","_rev":"9-z"},"_id":"outer","_rev":"1-x"}`,
	`{"_id":"a","_id":"b","_rev":"1-x"}`,
	`{"_id":"a","_rev":"1-x","_revisions":{"start":1,"ids":["x"]},"_revisions":{"start":1,"ids":["x"]}}`,
	`{"_id":1,"_rev":"1-x"}`,
	`{"_id":["a"],"_rev":"1-x"}`,
	`{"_id":"a","_rev":{"x":1}}`,
	`{"_id":"a","_rev":"1-x","_deleted":false}`,
	`{"_id":"a","_rev":"1-x","_deleted":"true"}`,
	`{"_id":"a","_rev":"1-x","_deleted":null}`,
	`{"_id":"a","_rev":"1-x","_deleted":[true]}`,
	`{"_id":"a","_rev":"1-x","_revisions":[1]}`,
	`{"_id":"a","_rev":"1-x","_revisions":"x"}`,
	`{"_id":"a","_rev":"1-x","_revisions":{"ids":["x"],"start":1,"other":{"a":[1]}}}`,
	`{"_id":"a","_rev":"1-x","_revisions":{"start":1,"ids":[]}}`,
	`{"_id":"a","_rev":"1-x","_revisions":{"ids":["x"]}}`,
	`{"_id":"a","_rev":"1-x","_revisions":{"start":12345678901,"ids":["x"]}}`,
	`{"_id":"a","_rev":"1-x","_revisions":{ "ids" : [ "x\u0041" , "y" ] , "start" : 3 }}`,
	`{"_id":"","_rev":""}`,
	`{"n":-1.5e+10,"t":true,"f":false,"z":null,"_id":"a","_rev":"1-x"}`,
	`{"a":{"b":{"c":[[[]]],"d":"{[\"]}"}},"_rev":"1-x","_id":"a"}`,
	"{\"k\xff\":\"v\",\"_id\":\"a\",\"_rev\":\"1-x\"}",
}

// envelopeGiveUps are valid bodies validEnvelope leaves to scanEnvelope:
// escapes or non-ASCII bytes where it would compare or keep a string, and
// a `_revisions` that only the full decoder can judge.
var envelopeGiveUps = []string{
	`{"_id":"a","_rev":"1-x","_revisions":{"start":1,"start":2,"ids":["x"]}}`, // replicate.ParseRevisions refuses repeated names
	`{"_id":"a","_rev":"1-x","_revisions":{"start":"1","ids":["x"]}}`,
	`{"_id":"a","_rev":"1-x","_revisions":{"start":1.0,"ids":["x"]}}`,
	`{"_id":"a","_rev":"1-x","_revisions":{"start":1,"ids":[1]}}`,
	`{"\u005fid":"escaped name","_rev":"1-x"}`,
	`{"_id":"\u00e9t\u00e9","_rev":"1-x"}`,
	`{"_id":"été","_rev":"1-x"}`,
	`{"_id":"a\"b","_rev":"1-x"}`,
	"{\"_id\":\"bad utf8 \xff\",\"_rev\":\"1-x\"}",
}

// TestValidEnvelopeAgrees checks that validEnvelope, where it answers,
// gives scanEnvelope's envelope, on the cases above and on every
// benchmark document.
func TestValidEnvelopeAgrees(t *testing.T) {
	for _, c := range envelopeCases {
		if !checkEnvelopeAgrees(t, []byte(c)) {
			t.Errorf("validEnvelope gave up on %s", c)
		}
	}
	for _, c := range envelopeGiveUps {
		if checkEnvelopeAgrees(t, []byte(c)) {
			t.Errorf("validEnvelope answered %s, which it cannot judge alone", c)
		}
	}
	err := dataset.Synth{Name: "env", Docs: 300, MinSize: 1024, Seed: 7}.DB().Each(func(rev []byte) error {
		d, err := replicate.ParseDoc(rev)
		if err != nil {
			return err
		}
		if !checkEnvelopeAgrees(t, d.Body) {
			t.Fatalf("validEnvelope gave up on a plain document: %.200s", d.Body)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkEnvelopeAgrees compares the scanners on one valid body and
// reports whether validEnvelope answered.
func checkEnvelopeAgrees(t *testing.T, body []byte) bool {
	t.Helper()
	if !jsontext.Value(body).IsValid(envOptions...) {
		t.Fatalf("case is not valid JSON: %s", body)
	}
	fast, ok := validEnvelope(body)
	if !ok {
		return false
	}
	slow, err := scanEnvelope(body)
	if err != nil {
		t.Errorf("%s: validEnvelope answered, scanEnvelope failed: %v", body, err)
		return true
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Errorf("%s:\n validEnvelope %+v\n scanEnvelope  %+v", body, fast, slow)
	}
	return true
}

// FuzzValidEnvelope: on any valid JSON object, validEnvelope either gives
// up or agrees with scanEnvelope.
func FuzzValidEnvelope(f *testing.F) {
	for _, c := range append(envelopeCases, envelopeGiveUps...) {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v := jsontext.Value(body)
		if !v.IsValid(envOptions...) || v.Kind() != '{' {
			return
		}
		checkEnvelopeAgrees(t, body)
	})
}

// BenchmarkEnvelope reads the envelope of the benchmarks' 1 KiB
// documents with each scanner; compare their ns/op (issue 10: the body
// scan was a quarter of a restore's CPU).
func BenchmarkEnvelope(b *testing.B) {
	var bodies [][]byte
	err := dataset.Synth{Name: "env", Docs: 1000, MinSize: 1024, Seed: 1}.DB().Each(func(rev []byte) error {
		d, err := replicate.ParseDoc(rev)
		bodies = append(bodies, d.Body)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("scanEnvelope", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := scanEnvelope(bodies[i%len(bodies)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("validEnvelope", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, ok := validEnvelope(bodies[i%len(bodies)]); !ok {
				b.Fatal("gave up")
			}
		}
	})
}
