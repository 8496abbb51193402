package couch

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestEscapeDocID(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a/b", "a%2Fb"},
		{"a+b", "a%2Bb"},
		{"a b", "a%20b"},
		{"a%2Bb", "a%252Bb"},
		{"123+456", "123%2B456"},
		{"é/ü", "%C3%A9%2F%C3%BC"},
		{"part:doc", "part:doc"},
		{"a.b-c_d~e", "a.b-c_d%7Ee"},
		{"_design/app", "_design/app"},
		{"_design/a/b", "_design/a%2Fb"},
		{"_design/with/slash", "_design/with%2Fslash"},
		{"_local/x+y", "_local/x%2By"},
		{"_designer/x", "_designer%2Fx"},
		{"?#&=;", "%3F%23%26%3D%3B"},
	} {
		if got := EscapeDocID(c.in); got != c.want {
			t.Errorf("EscapeDocID(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestEscapeDB(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a-b_c", "a-b_c"},
		{"a$b", "a%24b"},
		{"a(b)", "a%28b%29"},
		{"a/b+c$(x)", "a%2Fb%2Bc%24%28x%29"},
		{"_design/x", "_design%2Fx"}, // no prefix rule for databases
	} {
		if got := EscapeDB(c.in); got != c.want {
			t.Errorf("EscapeDB(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := EscapeAttName("dir/a b.txt"); got != "dir%2Fa%20b.txt" {
		t.Errorf("EscapeAttName = %q", got)
	}
}

// Names travel through net/http encoded exactly once and come back intact.
func TestJoinPath_OnTheWire(t *testing.T) {
	type seen struct{ raw, path string }
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.RequestURI, r.URL.Path}
	}))
	defer srv.Close()

	for _, prefix := range []string{"", "/couch", "/couch/"} {
		base, err := url.Parse(srv.URL + prefix)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			db, id, att string
			wantRaw     string
		}{
			{"a/b+c$(x)", "_design/with/slash", "", "/a%2Fb%2Bc%24%28x%29/_design/with%2Fslash"},
			{"db", "a+b", "", "/db/a%2Bb"},
			{"db", "a%2Bb", "", "/db/a%252Bb"},
			{"db", "a b", "", "/db/a%20b"},
			{"db", "é/ü", "f/g h.txt", "/db/%C3%A9%2F%C3%BC/f%2Fg%20h.txt"},
			{"db", "_local/cp", "", "/db/_local/cp"},
		} {
			segs := []string{EscapeDB(c.db), EscapeDocID(c.id)}
			if c.att != "" {
				segs = append(segs, EscapeAttName(c.att))
			}
			u := JoinPath(base, segs...)
			q := u.Query()
			q.Set("rev", "1-a+b")
			u.RawQuery = q.Encode()
			resp, err := http.Get(u.String())
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			s := <-got
			wantRaw := strings.TrimRight(prefix, "/") + c.wantRaw + "?rev=1-a%2Bb"
			if s.raw != wantRaw {
				t.Errorf("sent %q, want %q", s.raw, wantRaw)
			}
			// The server's decoding gives back the names.
			wantPath := strings.TrimRight(prefix, "/") + "/" + c.db + "/" + c.id
			if c.att != "" {
				wantPath += "/" + c.att
			}
			if s.path != wantPath {
				t.Errorf("decoded %q, want %q", s.path, wantPath)
			}
		}
	}
}

func TestJoinPath_KeepsBase(t *testing.T) {
	base, _ := url.Parse("http://u:p@h:5984/pre%2Ffix/?q=1#f")
	u := JoinPath(base, "db", "_changes")
	if got, want := u.String(), "http://u:p@h:5984/pre%2Ffix/db/_changes"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if base.String() != "http://u:p@h:5984/pre%2Ffix/?q=1#f" {
		t.Errorf("base modified: %s", base)
	}
	if got := JoinPath(base).EscapedPath(); got != "/pre%2Ffix" {
		t.Errorf("no segments: %q", got)
	}
}

func TestRedactURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://admin:s3cret@localhost:5984/db", "http://admin@localhost:5984/db"},
		{"https://user@host/db", "https://user@host/db"},
		{"http://host/db?x=1", "http://host/db?x=1"},
		{"http://admin:s3cret@host:badport/db", "http://admin@host:badport/db"},
		{"http://admin:p@ss:w0rd@host/db", "http://admin@host/db"},
		{"admin:s3cret@host", "admin@host"},
		// unescaped "#", "?", "/" or "@" in the password: the parse
		// splits the URL elsewhere, so the cut goes to the last "@"
		{"http://op:s3cret#yz@127.0.0.1:25984/special", "http://op@127.0.0.1:25984/special"},
		{"http://op:s3cret?yz@127.0.0.1:25984/special", "http://op@127.0.0.1:25984/special"},
		{"http://op:s3cret/yz@127.0.0.1:25984/special", "http://op@127.0.0.1:25984/special"},
		{"http://op:123/s3cret@host/db", "http://op@host/db"},
		{"http://op:Pq@ss:w0rd/Zx@127.0.0.1:25984/db", "http://op@127.0.0.1:25984/db"},
		{"http://op:s3cret@host/db?x=1#f", "http://op@host/db?x=1#f"},
	} {
		got := RedactURL(c.in)
		if got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(got, "s3cret") || strings.Contains(got, "w0rd") || strings.Contains(got, "yz") || strings.Contains(got, "Zx") {
			t.Errorf("RedactURL(%q) leaks the password: %q", c.in, got)
		}
	}
	if Redacted(nil) != "" {
		t.Error("Redacted(nil) not empty")
	}
}
