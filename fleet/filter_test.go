package fleet

import (
	"slices"
	"testing"
)

func TestFilter_Match(t *testing.T) {
	all := []string{"_global_changes", "_replicator", "_users", "alpha", "beta", "org/users", "org/a/b"}
	tests := []struct {
		name string
		f    Filter
		want []string
	}{
		{"replicate defaults", Filter{Skip: ReplicateSkip}, []string{"alpha", "beta", "org/users", "org/a/b"}},
		{"backup defaults", Filter{Skip: BackupSkip}, []string{"_replicator", "_users", "alpha", "beta", "org/users", "org/a/b"}},
		{"no skip", Filter{}, all},
		{"star does not ask for _users", Filter{Include: []string{"*"}, Skip: ReplicateSkip}, []string{"alpha", "beta"}},
		{"asked for _users", Filter{Include: []string{"_users", "a*"}, Skip: ReplicateSkip}, []string{"_users", "alpha"}},
		{"underscore glob asks", Filter{Include: []string{"_*"}, Skip: ReplicateSkip}, []string{"_global_changes", "_replicator", "_users"}},
		{"slash", Filter{Include: []string{"org/*"}}, []string{"org/users"}},
		{"exclude wins", Filter{Include: []string{"*", "*/*"}, Exclude: []string{"b*", "org/u*"}, Skip: ReplicateSkip}, []string{"alpha"}},
		{"exclude system", Filter{Include: []string{"_*"}, Exclude: []string{"_r*"}, Skip: ReplicateSkip}, []string{"_global_changes", "_users"}},
		{"class and escape", Filter{Include: []string{"[ab]lph?", `bet\a`}}, []string{"alpha", "beta"}},
		{"shell negation", Filter{Include: []string{"[!a]*"}, Skip: ReplicateSkip}, []string{"beta"}},
		{"caret negation", Filter{Include: []string{"[^a]*"}, Skip: ReplicateSkip}, []string{"beta"}},
		{"exclude negated", Filter{Exclude: []string{"[!ab]*", "*/*", "*/*/*"}, Skip: ReplicateSkip}, []string{"alpha", "beta"}},
		{"dash first or last", Filter{Include: []string{"org[-/]*", "[b-]eta", "[!-]lpha"}}, []string{"alpha", "beta", "org/users"}},
	}
	for _, tt := range tests {
		if got := tt.f.Apply(all); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Apply = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestFilter_Validate(t *testing.T) {
	if err := (Filter{Include: []string{"a*", "org/*"}, Exclude: []string{"[a-c]"}}).Validate(); err != nil {
		t.Errorf("valid patterns: %v", err)
	}
	if err := (Filter{Exclude: []string{"[a-"}}).Validate(); err == nil {
		t.Error("Validate([a-) = nil, want error")
	}
	for _, p := range []string{"syn[-/]*", "[]a]", "[!]a]", "[a-]", "[!a]"} {
		if err := (Filter{Include: []string{p}}).Validate(); err != nil {
			t.Errorf("Validate(%s): %v", p, err)
		}
	}
	for _, c := range []struct{ p, name string }{{"[]a]", "]"}, {"[!]a]", "b"}, {"[a-]", "-"}, {`a\*`, "a*"}} {
		if !MatchPattern(c.p, c.name) {
			t.Errorf("%s does not match %q", c.p, c.name)
		}
	}
	if MatchPattern("[!]a]", "]") || MatchPattern("[!a]", "a") {
		t.Error("a negated class matched what it names")
	}
	if (Filter{Include: []string{"[a-"}}).Match("a") {
		t.Error("malformed pattern matched")
	}
}
