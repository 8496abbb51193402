package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

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
