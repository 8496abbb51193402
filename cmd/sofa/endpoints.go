package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"

	"golang.org/x/term"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/couch"
)

// atHint explains the usual cause of an unparsable URL with an "@":
// special characters in its user name or password. It says nothing when
// the URL without them is no better (the fault is elsewhere, e.g. a bad
// escape in the path).
func atHint(raw, role string) string {
	at := strings.LastIndex(raw, "@")
	sep := strings.Index(raw, "://")
	if at < 0 || sep < 0 || at < sep {
		return ""
	}
	if u, err := url.Parse(raw[:sep+3] + raw[at+1:]); err != nil || couch.StrayAt(u) {
		return ""
	}
	return fmt.Sprintf(`: percent-encode special characters of the user name and password (%%23 for "#", %%3F for "?", %%2F for "/", %%40 for "@", %%3A for ":"), or give them in SOFA_%s_USER and SOFA_%s_PASSWORD`, role, role)
}

// withCredentials adds credentials from SOFA_<ROLE>_USER and
// SOFA_<ROLE>_PASSWORD to a URL that has none, and prompts for a missing
// password on a terminal. role is "SOURCE" or "TARGET".
func withCredentials(raw, role string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || couch.StrayAt(u) {
		why := atHint(raw, role)
		var ue *url.Error
		if why == "" && errors.As(err, &ue) {
			why = ": " + ue.Err.Error() // ue.URL would show the password
		}
		return "", usageErr("invalid %s URL %q%s", strings.ToLower(role), couch.RedactURL(raw), why)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", usageErr("invalid %s URL %q: want http(s)://[user[:password]@]host[:port][/db]", strings.ToLower(role), couch.RedactURL(raw))
	}
	user, pass := "", ""
	hasPass := false
	if u.User != nil {
		user = u.User.Username()
		pass, hasPass = u.User.Password()
	}
	if user == "" {
		user = os.Getenv("SOFA_" + role + "_USER")
	}
	if !hasPass {
		if p, ok := os.LookupEnv("SOFA_" + role + "_PASSWORD"); ok {
			pass, hasPass = p, true
		}
	}
	if user != "" && !hasPass && term.IsTerminal(int(os.Stdin.Fd())) {
		fmt.Fprintf(os.Stderr, "Password for %s at %s: ", user, u.Host)
		b, err := term.ReadPassword(int(os.Stdin.Fd()))
		fmt.Fprintln(os.Stderr)
		if err != nil {
			return "", fatal(fmt.Errorf("read password: %w", err))
		}
		pass, hasPass = string(b), true
	}
	if user != "" && !hasPass {
		// Sending no password would cost the account a failed login
		// (CouchDB locks it out after a few) for nothing.
		return "", usageErr("no password given for user %q of the %s URL %q: put it in the URL, set SOFA_%s_PASSWORD, or run on a terminal to be asked",
			user, strings.ToLower(role), couch.RedactURL(raw), role)
	}
	if user == "" && hasPass && pass != "" {
		// A password alone would be dropped: no request could use it.
		return "", usageErr("a password is given for the %s URL %q but no user name: put the user in the URL (http://USER@host) or set SOFA_%s_USER",
			strings.ToLower(role), couch.RedactURL(raw), role)
	}
	if user != "" {
		if hasPass {
			u.User = url.UserPassword(user, pass)
		} else {
			u.User = url.User(user)
		}
	}
	return u.String(), nil
}

// isArchive reports whether loc, the SOURCE of backup or the TARGET of
// restore, names an archive (a path, "-", s3://BUCKET/KEY) rather than a
// server or database: any other scheme is a URL (openEndpoint says what
// it wants). HOST:PORT or USER:PASSWORD@HOST without a scheme is a usage
// error (a forgotten http://, sofa.SchemeMissing), not an archive file of
// that name.
func isArchive(loc, role string) (bool, error) {
	switch {
	case strings.HasPrefix(loc, "s3://"):
		return true, sofa.CheckLocation(loc)
	case strings.Contains(loc, "://"):
		return false, nil
	case sofa.SchemeMissing(loc):
		return false, usageErr("invalid %s %q: a server URL needs http:// or https:// (an archive path does not look like HOST:PORT or USER:PASSWORD@HOST)", strings.ToLower(role), couch.RedactURL(loc))
	}
	return true, sofa.CheckLocation(loc) // a mistyped server URL with its password is refused
}

// insecureWarning is printed once per run that skips certificate checks.
var insecureWarning sync.Once

// openEndpoint probes a URL as a server or database; lim paces its
// requests (nil: none).
func openEndpoint(ctx context.Context, raw, role string, opts couch.Options, lim *sofa.Limiter) (*sofa.Endpoint, error) {
	full, err := withCredentials(raw, role)
	if err != nil {
		return nil, err
	}
	if opts.InsecureSkipVerify {
		insecureWarning.Do(func() {
			fmt.Fprintln(os.Stderr, "sofa: warning: --insecure: https server certificates are NOT verified; anyone on the network path can read and change the data and the credentials")
		})
	}
	opts.PasswordHint = "set SOFA_" + role + "_PASSWORD (or run on a terminal to be asked)"
	ep, err := sofa.Open(ctx, full, sofa.OpenOptions{Client: opts, Limiter: lim, Unpaced: lim == nil})
	if err != nil {
		var oe *sofa.OptionError
		if errors.Is(err, context.Canceled) {
			return nil, err
		} else if errors.As(err, &oe) {
			return nil, fmt.Errorf("%s: %w", strings.ToLower(role), err) // a usage error (exitFor)
		}
		return nil, fatal(fmt.Errorf("%s: %w", strings.ToLower(role), err))
	}
	checkOpenFiles(opts.MaxConns)
	if srv := ep.Couch().Server; opts.Auth == couch.AuthCookie && srv.AuthUsed() != couch.AuthCookie {
		fmt.Fprintf(os.Stderr, "sofa: warning: %s: %s has no /_session: credentials are sent with every request (basic authentication) instead of --auth cookie\n", strings.ToLower(role), srv.URL())
	}
	return ep, nil
}
