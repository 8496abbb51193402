package couchtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
)

// Start starts a server of the run's kind (RunKind) for one test and stops
// it at Cleanup: an admin-party PouchDB Server, or a CouchDB whose URL
// carries its admin's credentials. It fails the test (never skips) when
// the server cannot start, for example when node_modules is missing; it
// skips only when every server named by SOFA_COUCHDB_URL is taken. At
// Cleanup it also fails the test if the server crashed meanwhile.
func Start(t testing.TB) *Server { return StartWith(t, Options{}) }

// StartWith is Start with options (admin, users, kind, CouchDB settings).
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := StartServer(context.Background(), opts)
	if errors.Is(err, ErrNoFreeServer) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// StartKind is Start for a given kind whatever the run's kind, for tests
// that need both servers (copies between vendors). It skips the test when
// kind is CouchDB and none is available.
func StartKind(t testing.TB, kind Kind) *Server {
	t.Helper()
	if kind == CouchDB {
		if ok, why := CouchAvailable(); !ok {
			t.Skip("needs CouchDB: " + why)
		}
	}
	return StartWith(t, Options{Kind: kind})
}

var shared struct {
	mu      sync.Mutex
	inMain  bool
	started bool
	srv     *Server
	err     error
}

// Shared returns the server of the run's kind shared by all tests of the
// test binary, starting it on first use. The package's TestMain must call
// Main, which stops it; without that Shared fails the test. Tests sharing
// it should use their own databases (UniqueDBName, NewDB).
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.inMain {
		t.Fatal("couchtest: Shared needs `func TestMain(m *testing.M) { couchtest.Main(m) }` in the package's tests")
	}
	if !shared.started {
		shared.started = true
		shared.srv, shared.err = StartServer(context.Background(), Options{})
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	if err := shared.srv.Err(); err != nil {
		t.Fatal(err)
	}
	return shared.srv
}

// Main runs the tests of m, stops the shared server if one was started and
// exits with m's code. Call it from TestMain. It first prints which server
// the package's end-to-end tests run on (see RunKind) and, when CouchDB is
// not available, why its tests are not run. A shared server that crashed
// during the run turns a passing run into exit code 1.
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.inMain = true
	shared.mu.Unlock()

	if _, err := RunKind(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, Describe())

	code := m.Run()

	shared.mu.Lock()
	srv := shared.srv
	shared.mu.Unlock()
	if srv != nil {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// Describe says in one line which server end-to-end tests run on, and when
// CouchDB is not available, why.
func Describe() string {
	kind, err := RunKind()
	if err != nil {
		return err.Error()
	}
	switch {
	case kind == CouchDB && couchURLs() != nil:
		return fmt.Sprintf("couchtest: end-to-end tests run on %s named by %s", kind, EnvCouchURL)
	case kind == CouchDB:
		rel, _ := couchRelease()
		return fmt.Sprintf("couchtest: end-to-end tests run on %s started from %s", kind, rel)
	}
	if ok, why := CouchAvailable(); !ok {
		return fmt.Sprintf("couchtest: end-to-end tests run on %s; CouchDB tests SKIPPED: %s", kind, why)
	}
	return fmt.Sprintf("couchtest: end-to-end tests run on %s (%s=%s)", kind, EnvServer, kind)
}
