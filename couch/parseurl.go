package couch

import (
	"fmt"
	"net/url"
	"strings"
)

// ParseURL parses a server or database URL as given by a user. Its errors
// name the URL without credentials: when an "@" follows the scheme and
// the URL does not parse, or parses with an "@" outside its userinfo
// (StrayAt: a password with an unescaped "#", "?" or "/" split it), the
// error says to percent-encode the user name and password and gives no
// detail of the parser's, which quotes the text it stumbled on (part of
// the password: `invalid port ":SECRET"`, `invalid URL escape "%in"`).
func ParseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err == nil && !StrayAt(u) {
		return u, nil
	}
	if credentialsIn(raw) {
		return nil, fmt.Errorf(`invalid URL %q: percent-encode special characters of the user name and password (%%23 for "#", %%3F for "?", %%2F for "/", %%25 for "%%", %%40 for "@", %%3A for ":" in the user name)`, RedactURL(raw))
	}
	if err != nil {
		return nil, fmt.Errorf("invalid URL %q: %w", RedactURL(raw), stripURLError(err))
	}
	return u, nil
}

// credentialsIn reports an "@" after the scheme's "://": text before it
// is a user name and maybe a password.
func credentialsIn(raw string) bool {
	i := strings.Index(raw, "://")
	return i >= 0 && strings.Contains(raw[i+3:], "@")
}
