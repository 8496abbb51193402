package couchtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
)

// Start starts an admin-party server for one test and stops it at Cleanup.
// It fails the test (never skips) when the server cannot start, for example
// when node_modules is missing. At Cleanup it also fails the test if the
// server crashed meanwhile.
func Start(t testing.TB) *Server { return StartWith(t, Options{}) }

// StartWith is Start with options (admin, users).
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := StartServer(context.Background(), opts)
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

var shared struct {
	mu      sync.Mutex
	inMain  bool
	started bool
	srv     *Server
	err     error
}

// Shared returns the admin-party server shared by all tests of the test
// binary, starting it on first use. The package's TestMain must call Main,
// which stops it; without that Shared fails the test. Tests sharing it
// should use their own databases (UniqueDBName, NewDB).
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
// exits with m's code. Call it from TestMain. A shared server that crashed
// during the run turns a passing run into exit code 1.
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.inMain = true
	shared.mu.Unlock()

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
