package jsonx

import "testing"

func TestValueEnd(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int // the end of the value at 0; -1: none
	}{
		{`"abc",`, 5},
		{`"a\"b"}`, 6},
		{`"a\\"x`, 5},
		{`"a\\\"b"`, 8},
		{`{"k":"}"}, 1`, 9},
		{`[1,[2,{"a":"]"}]],x`, 17},
		{`-1.5e3,`, 6},
		{`true}`, 4},
		{`null`, 4},
		{`"open`, -1},
		{`{"k":1`, -1},
		{`,`, -1},
		{``, -1},
	} {
		if got := ValueEnd([]byte(c.in), 0); got != c.want {
			t.Errorf("ValueEnd(%s) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestSkipSpaceAndPlain(t *testing.T) {
	if got := SkipSpace([]byte(" \t\r\n x"), 0); got != 5 {
		t.Errorf("SkipSpace = %d, want 5", got)
	}
	if got := SkipSpace([]byte("  "), 0); got != 2 {
		t.Errorf("SkipSpace of spaces only = %d, want 2", got)
	}
	for s, want := range map[string]bool{"doc-1": true, "": true, `a\"b`: false, "été": false, "a\x01": false} {
		if Plain([]byte(s)) != want {
			t.Errorf("Plain(%q) = %v, want %v", s, !want, want)
		}
	}
}
