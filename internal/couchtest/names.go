package couchtest

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// EscapeID percent-encodes a document id for a URL path: every byte except
// A-Z a-z 0-9 _ . - : is encoded, and the "/" after a leading "_design" or
// "_local" is kept, as CouchDB expects.
func EscapeID(id string) string {
	for _, p := range []string{"_design/", "_local/"} {
		if strings.HasPrefix(id, p) && len(id) > len(p) {
			return p + escapeBytes(id[len(p):])
		}
	}
	return escapeBytes(id)
}

// EscapeDB percent-encodes a database name for a URL path (every byte
// except a-z A-Z 0-9 _ . - : is encoded, "/" included).
func EscapeDB(db string) string { return escapeBytes(db) }

func escapeBytes(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '_', c == '.', c == '-', c == ':':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

var dbCounter atomic.Int64

// UniqueDBName returns a valid, per-process unique database name derived
// from the test's name: lower case, starting with a letter, at most 100
// bytes, for example "t-testfoo-bar-3".
func UniqueDBName(t testing.TB) string {
	var b strings.Builder
	b.WriteString("t-")
	for _, r := range strings.ToLower(t.Name()) {
		if b.Len() >= 80 {
			break
		}
		switch {
		case 'a' <= r && r <= 'z', '0' <= r && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return fmt.Sprintf("%s-%d", b.String(), dbCounter.Add(1))
}

// NewDB creates a database named by UniqueDBName on s (with the admin's
// credentials), fails the test if it cannot, and returns its name.
func (s *Server) NewDB(t testing.TB) string {
	t.Helper()
	db := UniqueDBName(t)
	if err := s.Client().CreateDB(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	return db
}
