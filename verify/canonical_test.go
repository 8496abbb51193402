package verify

import "testing"

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
