package couchtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Kind names a server implementation the harness runs.
type Kind string

const (
	// CouchDB is Apache CouchDB 3.x: started from a release (the
	// SOFA_COUCHDB_RELEASE tarball or directory, by default the one in
	// ../shared/couchdb beside the repository) or taken from
	// SOFA_COUCHDB_URL.
	CouchDB Kind = "couchdb"
	// PouchDB is PouchDB Server 4.2 from the repository's node_modules.
	PouchDB Kind = "pouchdb"
)

// Environment variables read by the harness.
const (
	// EnvServer chooses the kind of server a test binary runs its
	// end-to-end tests on: "couchdb" or "pouchdb". Unset means CouchDB
	// when one is available, else PouchDB Server.
	EnvServer = "SOFA_TEST_SERVER"
	// EnvCouchRelease names a CouchDB release: a .tar.gz (or .tar) as
	// shipped in ../shared/couchdb, or an unpacked directory holding
	// bin/couchdb.
	EnvCouchRelease = "SOFA_COUCHDB_RELEASE"
	// EnvCouchURL names running CouchDB servers instead of a release:
	// one URL, or several separated by commas, each with the admin's
	// credentials as userinfo (http://admin:pw@127.0.0.1:5984). Tests take
	// them over: every database but _users and _replicator is deleted
	// before a test gets one, and a test that needs more servers than are
	// named is skipped. Run such a pass with `go test -p 1`.
	EnvCouchURL = "SOFA_COUCHDB_URL"
)

// String returns the kind's display name.
func (k Kind) String() string {
	switch k {
	case CouchDB:
		return "Apache CouchDB"
	case PouchDB:
		return "PouchDB Server"
	}
	return string(k)
}

var runKind struct {
	once sync.Once
	kind Kind
	why  string // why CouchDB is not available, when it is not
	err  error
}

// RunKind returns the kind of server this test binary runs its end-to-end
// tests on (see EnvServer). An invalid EnvServer, or "couchdb" when none is
// available, is an error.
func RunKind() (Kind, error) {
	runKind.once.Do(func() {
		why := couchUnavailable()
		runKind.why = why
		switch v := strings.ToLower(strings.TrimSpace(os.Getenv(EnvServer))); v {
		case "":
			runKind.kind = CouchDB
			if why != "" {
				runKind.kind = PouchDB
			}
		case string(CouchDB):
			runKind.kind = CouchDB
			if why != "" {
				runKind.err = fmt.Errorf("couchtest: %s=couchdb but %s", EnvServer, why)
			}
		case string(PouchDB):
			runKind.kind = PouchDB
		default:
			runKind.err = fmt.Errorf("couchtest: %s=%q: want couchdb or pouchdb", EnvServer, v)
		}
	})
	return runKind.kind, runKind.err
}

// CouchAvailable reports whether CouchDB tests can run here; when they
// cannot it says why (no release found and no SOFA_COUCHDB_URL).
func CouchAvailable() (bool, string) {
	why := couchUnavailable()
	return why == "", why
}

// RequireKind skips t unless the run's kind is k. Use it for tests of one
// server's behaviour (a CouchDB-only feature, a PouchDB Server quirk).
func RequireKind(t testing.TB, k Kind, why string) {
	t.Helper()
	got, err := RunKind()
	if err != nil {
		t.Fatal(err)
	}
	if got != k {
		t.Skipf("runs on %s only (%s); this pass runs on %s", k, why, got)
	}
}

// IsCouchDB reports whether the run's kind is CouchDB.
func IsCouchDB() bool {
	k, _ := RunKind()
	return k == CouchDB
}

func couchUnavailable() string {
	if couchURLs() != nil {
		return ""
	}
	if _, err := couchRelease(); err != nil {
		return err.Error()
	}
	return ""
}

func couchURLs() []string {
	v := strings.TrimSpace(os.Getenv(EnvCouchURL))
	if v == "" {
		return nil
	}
	var out []string
	for _, u := range strings.Split(v, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, strings.TrimRight(u, "/"))
		}
	}
	return out
}

// couchRelease returns the release to start CouchDB from: EnvCouchRelease,
// else the newest couchdb-*.tar.gz in ../shared/couchdb beside the
// repository.
func couchRelease() (string, error) {
	if v := os.Getenv(EnvCouchRelease); v != "" {
		// A relative path is taken from the repository's root (each
		// package's tests run in their own directory).
		if root, err := RepoRoot(); err == nil && !filepath.IsAbs(v) {
			v = filepath.Join(root, v)
		}
		if _, err := os.Stat(v); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvCouchRelease, v, err)
		}
		return v, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(filepath.Dir(root), "shared", "couchdb")
	m, _ := filepath.Glob(filepath.Join(dir, "couchdb-*.tar.gz"))
	if len(m) == 0 {
		return "", errors.New("no CouchDB: no release in " + dir + " and neither " + EnvCouchRelease + " nor " + EnvCouchURL + " is set")
	}
	sort.Strings(m)
	return m[len(m)-1], nil
}
