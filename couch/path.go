package couch

import (
	"net/url"
	"strings"
)

// CouchDB's replicator percent-encodes every byte of a name that is not in
// the set A-Z a-z 0-9 _ . - : (couch_util:url_encode). Doing the same keeps
// every name intact through any server or proxy: `+` is never read as a
// space, `/` never splits a path, and `%` never decodes twice.
func keepByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '_' || c == '.' || c == '-' || c == ':'
}

const upperHex = "0123456789ABCDEF"

// escape percent-encodes s byte by byte; it returns s itself when nothing
// needs encoding.
func escape(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !keepByte(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if keepByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
	}
	return b.String()
}

// EscapeDB returns a database name as one path segment: every byte outside
// A-Z a-z 0-9 _ . - : is percent-encoded, so "a/b+c" becomes "a%2Fb%2Bc".
func EscapeDB(name string) string { return escape(name) }

// EscapeDocID returns a document id as it goes into a URL path. Ids starting
// with "_design/" or "_local/" keep that prefix (and its slash) literally and
// encode the rest: "_design/a/b" becomes "_design/a%2Fb", "a+b" becomes
// "a%2Bb". The result may thus span two path segments.
func EscapeDocID(id string) string {
	for _, p := range [...]string{"_design/", "_local/"} {
		if strings.HasPrefix(id, p) {
			return p + escape(id[len(p):])
		}
	}
	return escape(id)
}

// EscapeAttName returns an attachment name as one path segment, encoded like
// a database name ("a/b.txt" becomes "a%2Fb.txt").
func EscapeAttName(name string) string { return escape(name) }

// JoinPath returns a copy of base whose path is base's path followed by the
// given segments, each already escaped (by EscapeDB, EscapeDocID,
// EscapeAttName, or a literal route such as "_changes"). Path and RawPath are
// both set so that net/http sends exactly the escaped bytes, once: a "%2F"
// stays "%2F" on the wire. Query and fragment are cleared; base is not
// modified and may carry a path prefix ("http://h/couch/").
func JoinPath(base *url.URL, escaped ...string) *url.URL {
	u := *base
	u.User = base.User // shared, immutable
	u.RawQuery, u.Fragment, u.RawFragment, u.ForceQuery = "", "", "", false

	var b strings.Builder
	b.WriteString(strings.TrimRight(base.EscapedPath(), "/"))
	for _, s := range escaped {
		b.WriteByte('/')
		b.WriteString(s)
	}
	raw := b.String()
	if raw == "" {
		raw = "/"
	}
	p, err := url.PathUnescape(raw)
	if err != nil {
		// Only reachable with a malformed escape passed in by the caller;
		// keep the bytes as given so the server reports the bad name.
		p = raw
	}
	u.Path, u.RawPath = p, raw
	return &u
}

// Redacted returns u as text with any password removed from its userinfo
// ("http://admin:secret@h/db" becomes "http://admin@h/db"), for logs and
// errors. Query parameters are kept. A nil u gives "".
func Redacted(u *url.URL) string {
	if u == nil {
		return ""
	}
	if _, has := u.User.Password(); !has {
		return u.String()
	}
	c := *u
	c.User = url.User(u.User.Username())
	return c.String()
}

// StrayAt reports an "@" outside the userinfo of a parsed URL (its host,
// path, query or fragment, in their escaped forms: a "%40" is an "@" the
// user meant): a password with an unescaped "#", "?" or "/" splits the URL
// before its "@", so the rest of the password was taken for a port, path
// or query.
func StrayAt(u *url.URL) bool {
	return strings.Contains(u.Host+u.EscapedPath()+u.RawQuery+u.EscapedFragment(), "@")
}

// RedactURL is Redacted for URL text, including text that does not parse
// as the user meant (a mistyped flag value, a password with an unescaped
// "#", "?", "/" or "@"): when any "@" follows the scheme outside a parsed
// userinfo, everything from the first ":" after the scheme to the last
// "@" is cut, so an error that echoes the input never leaks a password.
// A database or document name with an "@" is then cut too: over-redacting
// text that is only printed is harmless.
func RedactURL(raw string) string {
	i := strings.Index(raw, "://")
	rest := raw
	if i >= 0 {
		rest = raw[i+3:]
	}
	at := strings.LastIndexByte(rest, '@')
	if u, err := url.Parse(raw); err == nil && !strings.Contains(u.Opaque, "@") &&
		(at < 0 || u.User != nil && !StrayAt(u)) {
		return Redacted(u)
	}
	if at < 0 {
		return raw
	}
	user := rest[:at]
	if c := strings.IndexAny(user, ":/?#"); c >= 0 {
		user = user[:c]
	}
	return raw[:len(raw)-len(rest)] + user + rest[at:]
}
