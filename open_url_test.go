package sofa_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/couch"
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

// TestOpen_BadClientOptionsRefused: client options no request can use
// are refused before anything is asked (a negative attempt timeout timed
// every attempt out, and Open failed after its retries).
func TestOpen_BadClientOptionsRefused(t *testing.T) {
	for what, c := range map[string]couch.Options{
		"negative AttemptTimeout": {AttemptTimeout: -time.Second},
		"negative Max429Wait":     {Max429Wait: -time.Second},
		"negative MaxConns":       {MaxConns: -1},
		"unknown Auth":            {Auth: "bogus"},
	} {
		_, err := sofa.Open(t.Context(), "http://127.0.0.1:1/db", sofa.OpenOptions{Client: c})
		var oe *sofa.OptionError
		if !errors.As(err, &oe) {
			t.Errorf("%s: %v, want an *OptionError", what, err)
		}
	}
}

// TestOpen_CancelledNotCannotConnect: Open with a cancelled context says
// so, not "cannot connect" (nothing failed to connect).
func TestOpen_CancelledNotCannotConnect(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := sofa.Open(ctx, "http://127.0.0.1:1/db", sofa.OpenOptions{})
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "cannot connect") {
		t.Errorf("Open with a cancelled context: %v", err)
	}
}
