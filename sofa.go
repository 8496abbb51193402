// Package sofa is sofa as a Go library: open any endpoint (a CouchDB
// server or database over http(s), an archive file) with Open, then copy
// every database of one server to another with Copy. Progress is
// reported through the Progress interface; requests to each host go
// through a Limiter, the adaptive concurrency controller.
//
// The one-database engine is package replicate, the CouchDB client
// package couch, the archive format package archive and archive files
// package storage.
//
// Errors name options as the sofa command's users meet them, by its
// flags: --include, --exclude and --shard are Selection's Include,
// Exclude and Shard; --since and --set-id BackupOptions.Since and SetID;
// --force the Overwrite of BackupOptions and ArchiveOutput; --replace,
// --reuse-existing, --rename and --with-replicator RestoreOptions'
// Replace, ReuseExisting, Renames and WithReplicator (ReuseExisting and
// WithReplicator of the other options too); --with-users WithoutUsers;
// --q and --n the options' Q and N; --verify their Verify, and verify
// --full a verify.Options Mode of full; --create-target
// CopyDBOptions.CreateTarget; --no-checkpoints
// replicate.Options.NoCheckpoints; --allow-partial
// SetOptions.AllowPartial; --max-dbs and --ideal-duration RunControl's
// MaxDBs and IdealDuration; --fixed LimitOptions.Fixed; --retry-time
// couch.Options.RetryTime; --s3-region s3.Options.Region.
package sofa

import (
	"context"
	"errors"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/storage"
	"github.com/sofadb/sofa/storage/s3"
)

// OpenOptions configure Open.
type OpenOptions struct {
	// Client are the HTTP client's options of http(s) endpoints. Its
	// Pacer is set by Open (see Limiter).
	Client couch.Options
	// Limiter paces every request to an http(s) endpoint's host. Nil:
	// Open makes one for the host from Limit. Give two endpoints on the
	// same host the same Limiter.
	Limiter *Limiter
	// Limit configures the Limiter Open makes when Limiter is nil.
	Limit LimitOptions
	// Unpaced sends requests without a Limiter (a single sequential
	// reader such as a listing needs none).
	Unpaced bool
	// Store holds archive paths. Nil: storage.Local{} (files, and "-"
	// for stdin and stdout). s3:// locations are in an S3 store made
	// from S3.
	Store storage.Store
	// S3 configures the store of s3://BUCKET/KEY archives: endpoint,
	// region, path-style addressing, transfers in flight and part size
	// (zero values: the SDK's configuration and the defaults of package
	// storage/s3).
	S3 s3.Options
}

// EndpointKind says what an Endpoint is.
type EndpointKind int

const (
	// KindServer is a CouchDB server (all its databases).
	KindServer EndpointKind = iota
	// KindDatabase is one database of a CouchDB server.
	KindDatabase
	// KindArchive is an archive (a file, "-", or an s3:// object).
	KindArchive
)

// An Endpoint is an opened location: a CouchDB server or database
// (probed once), or an archive.
type Endpoint struct {
	scheme   *Scheme
	location string // redacted
	couch    *couch.Endpoint
	limiter  *Limiter
	archive  string
	store    storage.Store
}

// String is the location without credentials.
func (e *Endpoint) String() string {
	if e == nil {
		return "<nil endpoint>"
	}
	return e.location
}

// opened refuses, with an *OptionError, an endpoint that Open did not
// return (nil, or a zero Endpoint): each call that takes endpoints checks
// them first.
func opened(eps ...*Endpoint) error {
	for _, e := range eps {
		if e == nil || e.couch == nil && e.store == nil {
			return optionErr("an endpoint not opened with sofa.Open (nil or a zero Endpoint)")
		}
	}
	return nil
}

// Close closes the endpoint's idle HTTP connections, for a program done
// with it (they would close themselves after 90 s idle); an endpoint of
// a server or database stays usable (a later call opens new ones). An
// archive endpoint holds none. It returns nil.
func (e *Endpoint) Close() error {
	if e != nil && e.couch != nil {
		e.couch.Server.CloseIdleConnections()
	}
	return nil
}

// Kind says whether e is a server, a database or an archive.
func (e *Endpoint) Kind() EndpointKind {
	switch {
	case e.couch == nil:
		return KindArchive
	case e.couch.DBName == "":
		return KindServer
	}
	return KindDatabase
}

// DBName is the database of a database endpoint, "" otherwise.
func (e *Endpoint) DBName() string {
	if e.couch == nil {
		return ""
	}
	return e.couch.DBName
}

// Couch is the CouchDB client of an http(s) endpoint (nil for an
// archive): its server (vendor, version, request counters) and database
// name.
func (e *Endpoint) Couch() *couch.Endpoint { return e.couch }

// Limiter is the limiter pacing an http(s) endpoint's requests (nil for
// an archive).
func (e *Endpoint) Limiter() *Limiter { return e.limiter }

// Archive is the location of an archive endpoint in its Store ("" for
// others).
func (e *Endpoint) Archive() string { return e.archive }

// Store is the storage of an archive endpoint (nil for others).
func (e *Endpoint) Store() storage.Store { return e.store }

// A Scheme opens the locations of one kind. Every scheme is listed in
// one registry (see Schemes); Open picks by the part of the location
// before "://" (none: a path).
type Scheme struct {
	// Name is the URL scheme ("http"), or "" for paths and "-".
	Name string
	// Open opens a location of this scheme.
	Open func(ctx context.Context, location string, o OpenOptions) (*Endpoint, error)
	// Redact returns the location without credentials, for output.
	Redact func(location string) string
}

var couchScheme = func(name string) *Scheme {
	return &Scheme{Name: name, Open: openCouch, Redact: couch.RedactURL}
}

// schemes is the registry: every kind of location Open accepts.
var schemes = []*Scheme{
	couchScheme("http"),
	couchScheme("https"),
	{Name: "s3", Open: openS3, Redact: s3.Redact},
	{Name: "", Open: openArchive, Redact: func(s string) string { return s }},
}

// Schemes lists the registered schemes.
func Schemes() []Scheme {
	out := make([]Scheme, len(schemes))
	for i, s := range schemes {
		out[i] = *s
	}
	return out
}

// ErrUnknownScheme: Open of a location whose scheme is not registered.
var ErrUnknownScheme = errors.New("unknown location scheme")

var schemeRE = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*)://`)

// schemeOf returns the registered scheme of location.
func schemeOf(location string) (*Scheme, error) {
	if location == "" {
		return nil, optionErr("empty location: want %s (or - for stdin or stdout)", knownSchemes())
	}
	name := ""
	if m := schemeRE.FindStringSubmatch(location); m != nil {
		name = strings.ToLower(m[1]) // schemes are case-insensitive (RFC 3986)
	} else if SchemeMissing(location) {
		return nil, optionErr("%q: a server URL needs http:// or https:// (an archive file named so: put ./ in front)", couch.RedactURL(location))
	}
	for _, s := range schemes {
		if s.Name != name {
			continue
		}
		if s.Name != "http" && s.Name != "https" && credentialsRE.MatchString(location) && !explicitPath(location) {
			return nil, optionErr("%s: holds USER:PASSWORD@ as a server URL does, but is no http:// or https:// URL (a mistyped scheme?); an archive location never carries credentials", maskCredentials(location))
		}
		return s, nil
	}
	return nil, optionErr("%w %q in %s: want %s", ErrUnknownScheme, name, couch.RedactURL(location), knownSchemes())
}

// knownSchemes names the registered schemes for an error: "http://,
// https://, s3:// or a file path".
func knownSchemes() string {
	var names []string
	for _, s := range schemes {
		if s.Name != "" {
			names = append(names, s.Name+"://")
		}
	}
	return strings.Join(names, ", ") + " or a file path"
}

// explicitPath reports a location written as a file path beyond doubt
// (./x, ../x, /x but not //x, a URL without its scheme).
func explicitPath(location string) bool {
	return strings.HasPrefix(location, "./") || strings.HasPrefix(location, "../") ||
		strings.HasPrefix(location, "/") && !strings.HasPrefix(location, "//")
}

// maskCredentials is location with the password of each USER:PASSWORD@
// in it masked, the rest as typed.
func maskCredentials(location string) string {
	return credentialsRE.ReplaceAllStringFunc(location, func(m string) string {
		user, _, _ := strings.Cut(m, ":")
		return user + ":xxxxx@"
	})
}

// credentialsRE matches the USER:PASSWORD@ of a URL anywhere in a
// location: an archive path (unless explicitPath) or s3:// location
// holding one is a mistyped server URL ("http:/admin:pw@host",
// "//admin:pw@host"), refused without echoing it.
var credentialsRE = regexp.MustCompile(`[^/@:\s]*:[^/@\s]*@`)

// schemeMissingRE matches what is a server URL without its scheme, not
// a path: HOST:PORT[/...], USER:PASSWORD@HOST[...] (with or without a
// port).
var schemeMissingRE = regexp.MustCompile(`^([^/@:]*:[^/@]*@[^/]|[A-Za-z0-9.-]+:[0-9]+(/|$))`)

// SchemeMissing reports whether location, which has no scheme, is a
// server URL without its http:// (HOST:PORT, USER:PASSWORD@HOST...)
// rather than an archive path: Open refuses it (an OptionError), so that
// neither an archive file named after a server nor the password in the
// name comes of it.
func SchemeMissing(location string) bool {
	return !schemeRE.MatchString(location) && schemeMissingRE.MatchString(location)
}

// CheckLocation refuses a location no registered scheme takes (an
// *OptionError naming it without credentials), as Open would, without
// opening anything.
func CheckLocation(location string) error {
	_, err := schemeOf(location)
	return err
}

// Redact returns location without credentials, as its scheme spells it.
func Redact(location string) string {
	s, err := schemeOf(location)
	if err != nil {
		return couch.RedactURL(location)
	}
	return s.Redact(location)
}

// IsURL reports whether location names a CouchDB server or database
// (http or https), not an archive.
func IsURL(location string) bool {
	s, err := schemeOf(location)
	return err == nil && (s.Name == "http" || s.Name == "https")
}

// Open opens location: an http(s) URL of a CouchDB server or database
// (probed once: the server's welcome, and the database when the URL has
// a path), an archive path, "-" (stdin or stdout), or an archive object
// s3://BUCKET/KEY (read and written in place, never copied locally). An archive is not
// looked at before it is used (a backup creates it). The probe retries
// for at most 5 s (Client.RetryTime when shorter), whatever RetryTime
// says, so that a server that does not answer is reported soon; later
// requests retry for RetryTime. Errors never carry credentials; a
// location or option no request could use is an *OptionError.
func Open(ctx context.Context, location string, o OpenOptions) (*Endpoint, error) {
	s, err := schemeOf(location)
	if err != nil {
		return nil, err
	}
	ep, err := s.Open(ctx, location, o)
	if err != nil {
		return nil, err
	}
	ep.scheme = s
	ep.location = s.Redact(location)
	return ep, nil
}

func openCouch(ctx context.Context, location string, o OpenOptions) (*Endpoint, error) {
	if err := checkServerURL(location); err != nil {
		return nil, err
	}
	if err := o.Client.Check(); err != nil {
		return nil, &OptionError{Err: err}
	}
	if o.Limit.MaxRequests < 0 || o.Limit.MaxRPS < 0 {
		return nil, optionErr("requests in flight %d, requests per second %g: want 0 (the default: %d; no cap) or more", o.Limit.MaxRequests, o.Limit.MaxRPS, DefaultMaxRequests)
	}
	lim := o.Limiter
	if lim == nil && !o.Unpaced {
		lim = NewLimiter(HostOf(location), o.Limit)
	}
	copts := o.Client
	if lim != nil {
		copts.Pacer = pacer{lim.l}
	}
	ep, err := couch.Probe(ctx, location, copts)
	if err != nil {
		return nil, err
	}
	return &Endpoint{couch: ep, limiter: lim}, nil
}

func openArchive(ctx context.Context, location string, o OpenOptions) (*Endpoint, error) {
	st := o.Store
	if st == nil {
		st = storage.Local{}
	}
	return &Endpoint{archive: location, store: st}, nil
}

func openS3(ctx context.Context, location string, o OpenOptions) (*Endpoint, error) {
	if _, _, err := s3.Parse(location); err != nil {
		return nil, &OptionError{Err: err}
	}
	st, err := s3.New(ctx, o.S3)
	if errors.Is(err, s3.ErrBadOption) {
		return nil, &OptionError{Err: err}
	}
	if err != nil {
		return nil, err
	}
	return &Endpoint{archive: location, store: st}, nil
}

// checkServerURL refuses, as an *OptionError, what a server or database
// URL cannot hold and a request would only fail on after its retries: a
// URL that does not parse (couch.ParseURL: credentials never shown), a
// port outside 1-65535, a query string or a fragment (never sent:
// a database URL names the database by its path alone).
func checkServerURL(location string) error {
	u, err := couch.ParseURL(location)
	if err != nil {
		return &OptionError{Err: err}
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return optionErr("invalid URL %q: port %s is not in 1-65535", couch.RedactURL(location), p)
		}
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return optionErr("invalid URL %q: a server or database URL takes no query string or fragment", couch.RedactURL(location))
	}
	return nil
}

// HostOf is the host (and port) of an http(s) URL, "?" when it has none:
// the name of its Limiter.
func HostOf(location string) string {
	u, err := url.Parse(location)
	if err != nil {
		return "?"
	}
	return u.Host
}
