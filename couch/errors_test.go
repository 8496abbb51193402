package couch

import (
	"errors"
	"strings"
	"testing"
)

// An HTTP proxy's 407, to a request or to the CONNECT of an https one,
// says where its credentials go (a new user saw only "HTTP 407").
func TestError_ProxyAuthHint(t *testing.T) {
	for _, err := range []error{
		&Error{Method: "GET", Path: "/", Status: 407},
		&NetError{Op: "GET /", Err: errors.New("Proxy Authentication Required")},
	} {
		if !strings.Contains(err.Error(), "HTTP_PROXY") {
			t.Errorf("%q does not say where the proxy's credentials go", err)
		}
	}
	if e := (&Error{Method: "GET", Path: "/", Status: 401}); strings.Contains(e.Error(), "proxy") {
		t.Errorf("a 401 names the proxy: %q", e)
	}
}
