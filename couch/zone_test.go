package couch

import "testing"

// An IPv6 address with a zone (http://[::1%25lo]:5984) is sent as given:
// the request's URL was built with the zone's "%" unescaped and refused
// ("invalid URL escape").
func TestRequestURL_IPv6Zone(t *testing.T) {
	c, err := NewClient("http://[::1%25lo]:5984/pre", Options{})
	if err != nil {
		t.Fatal(err)
	}
	req, err := c.newHTTPRequest(t.Context(), &request{Method: "GET", Path: "/db"})
	if err != nil {
		t.Fatalf("request of a zoned IPv6 host: %v", err)
	}
	if req.URL.Host != "[::1%lo]:5984" || req.URL.EscapedPath() != "/pre/db" {
		t.Errorf("request URL %s (host %q), want the zoned host and /pre/db", req.URL, req.URL.Host)
	}
}
