package couch

import "testing"

func TestRequestKind(t *testing.T) {
	for path, want := range map[string]string{
		"":                         "/",
		"/":                        "/",
		"/_all_dbs":                "/_all_dbs",
		"/_session":                "/_session",
		"/db":                      "/db",
		"/a%2Fb":                   "/db",
		"/db/_changes":             "/db/_changes",
		"/db/_bulk_docs":           "/db/_bulk_docs",
		"/db/_local/sofa-claim-x":  "/db/_local",
		"/db/_design/app":          "/db/_design",
		"/db/_design/app/logo.png": "/db/_design/attachment",
		"/db/doc1":                 "/db/doc",
		"/db/doc1/file.txt":        "/db/doc/attachment",
		"/db/doc1/dir%2Ffile.txt":  "/db/doc/attachment",
	} {
		if got := requestKind(path); got != want {
			t.Errorf("requestKind(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestCountersKinds(t *testing.T) {
	var c Counters
	c.kinds.add("PUT", "/db")
	c.kinds.add("PUT", "/other")
	c.kinds.add("POST", "/db/_bulk_docs")
	k := c.Kinds()
	if k["PUT /db"] != 2 || k["POST /db/_bulk_docs"] != 1 || len(k) != 2 {
		t.Fatalf("Kinds() = %v", k)
	}
}
