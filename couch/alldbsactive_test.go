package couch

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The answers CouchDB 3.5.2 gave with max_dbs_open lowered (copied from a
// real server) are all read as all_dbs_active; other 500s are not.
func TestAllDBsActiveAnswers(t *testing.T) {
	for _, c := range []struct {
		body string
		want bool
	}{
		{`{"error":"error","reason":"all_dbs_active"}`, true},
		{`{"error":"invalid_stream_start","reason":"{error,all_dbs_active}","ref":1963847755}`, true},
		{`{"error":"internal_server_error","reason":"No DB shards could be opened.","ref":1963847755}`, true},
		{`{"error":"error","reason":"internal_server_error"}`, true},
		{`[{"error":"error","reason":"internal_server_error"},{"error":"error","reason":"internal_server_error"}]`, true},
		{`{"error":"unknown_error","reason":"function_clause","ref":1963847755}`, false},
		{`{"error":"internal_server_error","reason":"badarg"}`, false},
		{`{"error":"badmatch","reason":"{error,{forbidden,<<\"no\">>}}"}`, false},
	} {
		resp := &http.Response{StatusCode: 500, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(c.body))}
		e := readError(&request{Method: "GET", Path: "/db/_changes"}, resp)
		if got := e.AllDBsActive(); got != c.want {
			t.Errorf("%s: AllDBsActive = %v, want %v", c.body, got, c.want)
		}
		if got := dbsActiveBody([]byte(c.body)); got != c.want {
			t.Errorf("%s: dbsActiveBody = %v, want %v", c.body, got, c.want)
		}
	}
}
