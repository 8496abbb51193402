package couch

import (
	"strings"
	"testing"
)

// TestParseURL_NoPasswordInErrors: a password with an unescaped "#", "?"
// or "/" or a bad %-escape gives an error that shows no part of it (the
// parser's detail quoted it: `invalid port ":SECRET"`, `invalid URL escape
// "%in"`) and says to percent-encode; a good URL parses; an error without
// credentials keeps the parser's detail.
func TestParseURL_NoPasswordInErrors(t *testing.T) {
	for _, raw := range []string{
		"http://admin:SECRET#x@127.0.0.1:5984",
		"http://admin:SECRETa/b@127.0.0.1:5984/db",
		"http://admin:SECRET?x@127.0.0.1:5984",
		"http://admin:123/SECRET@127.0.0.1:5984", // parses, with an "@" in the path
		"http://admin:SE%inCRET@127.0.0.1:5984",
	} {
		_, err := ParseURL(raw)
		if err == nil {
			t.Errorf("%s: parsed", raw)
			continue
		}
		for _, part := range []string{"SECRET", "%in", "123", "CRET"} {
			if strings.Contains(err.Error(), part) {
				t.Errorf("%s: error shows %q: %v", raw, part, err)
			}
		}
		if !strings.Contains(err.Error(), "percent-encode") {
			t.Errorf("%s: error does not say to percent-encode: %v", raw, err)
		}
	}
	if u, err := ParseURL("http://ad%40min:p%23w@127.0.0.1:5984/db"); err != nil || u.User.Username() != "ad@min" {
		t.Errorf("escaped credentials: %v, %v", u, err)
	}
	if _, err := ParseURL("http://127.0.0.1:5984/a%zz"); err == nil || !strings.Contains(err.Error(), `invalid URL escape "%zz"`) {
		t.Errorf("a bad escape without credentials: %v, want the parser's detail", err)
	}
}
