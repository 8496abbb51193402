package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sofadb/sofa/replicate"
)

// canonicalBody returns a revision's body without `_revisions` (compared
// separately, over the part both sides keep) as RFC 8785 canonical JSON:
// members sorted by name, no whitespace, strings and numbers in one
// spelling (numbers as IEEE 754 doubles, as JavaScript servers hold them).
func canonicalBody(body []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	delete(m, "_revisions")
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return canonical(b)
}

// bigIntegers returns body's integer literals of 16 digits or more (where
// a double no longer holds every integer: 2^53 has 16), keyed by JSON
// pointer, for the bodies whose canonical forms (numbers as doubles) are
// equal: CouchDB keeps such integers exactly, so two of its copies that
// differ only there are different. Nil when there are none.
func bigIntegers(body []byte) (map[string]string, error) {
	d := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	var out map[string]string
	for {
		tok, err := d.ReadToken()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if tok.Kind() != '0' {
			continue
		}
		lit := tok.String()
		digits := strings.TrimPrefix(lit, "-")
		if len(digits) < 16 || strings.ContainsAny(digits, ".eE") {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[string(d.StackPointer())] = lit
	}
}

// bigIntegerDiff names the first integer of 16 digits or more that differs
// between a and b (see bigIntegers), or "" when none does.
func bigIntegerDiff(a, b []byte) string {
	ia, errA := bigIntegers(a)
	ib, errB := bigIntegers(b)
	if errA != nil || errB != nil {
		return ""
	}
	ptrs := make([]string, 0, len(ia)+len(ib))
	for p := range ia {
		ptrs = append(ptrs, p)
	}
	for p := range ib {
		if _, ok := ia[p]; !ok {
			ptrs = append(ptrs, p)
		}
	}
	slices.Sort(ptrs)
	for _, p := range ptrs {
		if ia[p] != ib[p] {
			return fmt.Sprintf("number at %s: a %s, b %s", p, orNone(ia[p]), orNone(ib[p]))
		}
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "(a shorter number)"
	}
	return s
}

func canonical(b []byte) ([]byte, error) {
	v := jsontext.Value(bytes.Clone(b))
	if err := v.Canonicalize(); err != nil {
		return nil, err
	}
	return v, nil
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// compareMetadata compares `_security` (normalized) and `_revs_limit`
// where both sides report one.
func compareMetadata(ctx context.Context, name string, a, b replicate.Source, r *Report) error {
	ma, err := a.Metadata(ctx)
	if err != nil {
		return fmt.Errorf("verify: a: %w", err)
	}
	mb, err := b.Metadata(ctx)
	if err != nil {
		return fmt.Errorf("verify: b: %w", err)
	}
	sa, errA := normalSecurity(ma.Security)
	sb, errB := normalSecurity(mb.Security)
	switch {
	case name == "_users" || name == "_replicator":
		// Each server keeps its own: CouchDB refuses writes to
		// _users/_security, and vendors start them differently.
	case errA != nil || errB != nil:
		r.addf(KindSecurity, "", "", "cannot parse _security: a: %v; b: %v", errA, errB)
	case !bytes.Equal(sa, sb):
		r.addf(KindSecurity, "", "", "a %s; b %s", clip(sa), clip(sb))
	}
	if ma.RevsLimit > 0 && mb.RevsLimit > 0 && ma.RevsLimit != mb.RevsLimit {
		r.addf(KindRevsLimit, "", "", "a %d, b %d", ma.RevsLimit, mb.RevsLimit)
	}
	return nil
}

// normalSecurity gives a `_security` object as canonical JSON with the
// admins and members sections always present and their names and roles
// sorted sets: {} and {"admins":{"names":[],"roles":[]}} are equal. Nil or
// empty input is the empty object.
func normalSecurity(raw []byte) ([]byte, error) {
	var sec map[string]json.RawMessage
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &sec); err != nil {
			return nil, err
		}
	}
	if sec == nil {
		sec = map[string]json.RawMessage{}
	}
	for _, section := range []string{"admins", "members"} {
		var g map[string]json.RawMessage
		if v, ok := sec[section]; ok {
			if err := json.Unmarshal(v, &g); err != nil {
				return nil, fmt.Errorf("%s: %w", section, err)
			}
		}
		if g == nil {
			g = map[string]json.RawMessage{}
		}
		for _, field := range []string{"names", "roles"} {
			var list []string
			if v, ok := g[field]; ok {
				if err := json.Unmarshal(v, &list); err != nil {
					return nil, fmt.Errorf("%s.%s: %w", section, field, err)
				}
			}
			list = sortedSet(list)
			if list == nil {
				list = []string{}
			}
			g[field], _ = json.Marshal(list)
		}
		sec[section], _ = json.Marshal(g)
	}
	b, err := json.Marshal(sec)
	if err != nil {
		return nil, err
	}
	return canonical(b)
}
