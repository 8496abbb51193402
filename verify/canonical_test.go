package verify

import (
	"strings"
	"testing"
)

func TestCanonicalBody(t *testing.T) {
	for _, c := range []struct {
		a, b  string
		equal bool
	}{
		{`{"b":1,"a":[1.50,"x"]}`, `{"a":[1.5,"x"],"b":1}`, true},
		{`{"n":1e2}`, `{"n":100}`, true},
		{`{"s":"\u003c"}`, `{"s":"<"}`, true},
		{`{"_id":"x","_revisions":{"start":1,"ids":["a"]}}`, `{"_id":"x"}`, true},
		{`{"n":1}`, `{"n":2}`, false},
		{`{"a":{"x":null}}`, `{"a":{}}`, false},
	} {
		ca, err := canonicalBody([]byte(c.a))
		if err != nil {
			t.Fatal(err)
		}
		cb, err := canonicalBody([]byte(c.b))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(ca) == string(cb); got != c.equal {
			t.Errorf("%s vs %s: equal %t, want %t (%s, %s)", c.a, c.b, got, c.equal, ca, cb)
		}
	}
	if _, err := canonicalBody([]byte(`{"a":`)); err == nil {
		t.Error("truncated body: no error")
	}
}

func TestNormalSecurity(t *testing.T) {
	eq := []string{``, `{}`, `{"admins":{"names":[],"roles":[]},"members":{}}`}
	first, err := normalSecurity([]byte(eq[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range eq[1:] {
		got, err := normalSecurity([]byte(s))
		if err != nil || string(got) != string(first) {
			t.Errorf("%s: %s (%v), want %s", s, got, err, first)
		}
	}
	x, _ := normalSecurity([]byte(`{"members":{"names":["b","a"]}}`))
	y, _ := normalSecurity([]byte(`{"members":{"names":["a","b"],"roles":[]}}`))
	z, _ := normalSecurity([]byte(`{"members":{"names":["a"]}}`))
	if string(x) != string(y) || string(x) == string(z) {
		t.Errorf("sets: %s %s %s", x, y, z)
	}
}

// Integers of 16 digits or more are compared exactly (CouchDB keeps them);
// shorter ones, floats and exponents only through the canonical form.
func TestBigIntegerDiff(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want string // "" for no difference
	}{
		{`{"n":9007199254740993}`, `{"n":9007199254740993}`, ""},
		{`{"n":9007199254740993}`, `{"n":9007199254740992}`, "number at /n: a 9007199254740993, b 9007199254740992"},
		{`{"x":[1,{"n":-12345678901234567890123}]}`, `{"x":[1,{"n":-12345678901234567890124}]}`, "number at /x/1/n"},
		{`{"a":1234567890123456,"b":2}`, `{"b":2,"a":1234567890123456}`, ""},
		{`{"n":123456789012345}`, `{"n":123456789012346}`, ""}, // 15 digits: the canonical form tells them apart
		{`{"n":12345678901234567.5}`, `{"n":12345678901234568}`, "number at /n: a (a shorter number), b 12345678901234568"},
	} {
		got := bigIntegerDiff([]byte(c.a), []byte(c.b))
		if c.want == "" && got != "" || c.want != "" && !strings.HasPrefix(got, c.want) {
			t.Errorf("%s vs %s: %q, want %q", c.a, c.b, got, c.want)
		}
	}
}
