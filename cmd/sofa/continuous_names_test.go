package main

import "testing"

// TestEventNames: the continuous summary names each database once, in
// the order first seen, with the count of a repeated one (a new user's
// busy run printed dozens of repeats).
func TestEventNames(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, "[]"},
		{[]string{"a"}, "[a]"},
		{[]string{"b", "a", "b", "b"}, "[b (x3) a]"},
	} {
		if got := eventNames(tc.in); got != tc.want {
			t.Errorf("eventNames(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
