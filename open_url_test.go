package sofa_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
)

// TestOpen_MalformedCredentialsNotShown: Open refuses a URL whose
// password holds an unescaped "#", "/" or a bad %-escape with an
// *OptionError that shows no part of the password (the parser's detail
// quoted it: `invalid port ":SECRET" after host`).
func TestOpen_MalformedCredentialsNotShown(t *testing.T) {
	for _, raw := range []string{"http://admin:SECRET#x@127.0.0.1:5984", "http://admin:SECRETa/b@127.0.0.1:5984", "http://admin:adm%inSECRET@127.0.0.1:5984/db"} {
		_, err := sofa.Open(t.Context(), raw, sofa.OpenOptions{})
		var oe *sofa.OptionError
		if !errors.As(err, &oe) || strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "%in") {
			t.Errorf("Open(%s): %v, want an *OptionError without the password", raw, err)
		}
	}
}

// TestOpen_EmptyLocationRefused: "" is no archive path (a backup into it
// ran whole and then failed to rename its file into place).
func TestOpen_EmptyLocationRefused(t *testing.T) {
	_, err := sofa.Open(t.Context(), "", sofa.OpenOptions{})
	var oe *sofa.OptionError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "empty location") {
		t.Errorf("Open(\"\"): %v, want an *OptionError", err)
	}
	if err := sofa.CheckLocation(""); err == nil {
		t.Error("CheckLocation(\"\") accepted")
	}
}
