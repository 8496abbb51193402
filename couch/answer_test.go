package couch

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// A _bulk_get answer is parsed in place from a pooled buffer: what the
// parser hands over must not alias it, since the buffer is reused by the
// next answer once this one is closed.
func TestAnswer_ParsedInPlaceKeepsNothing(t *testing.T) {
	body := synthBulkGet(t, 20)
	resp := &http.Response{Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
	if err := bufferBody(resp); err != nil {
		t.Fatal(err)
	}
	docs, errs, err := ParseBulkGet(resp.Body, nil)
	if err != nil || len(errs) != 0 || len(docs) != 20 {
		t.Fatalf("parse: %d docs, %v, %v", len(docs), errs, err)
	}
	want := make([][]byte, len(docs))
	for i, d := range docs {
		want[i] = bytes.Clone(d.Body)
	}
	resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 1)); err == nil {
		t.Error("a closed answer could still be read")
	}
	// The next answers reuse the buffer: scribble over whatever the pool
	// hands out.
	for range 4 {
		b := answerBufs.Get().(*bytes.Buffer)
		b.Reset()
		b.Write(bytes.Repeat([]byte{'#'}, len(body)))
		putAnswerBuf(b)
	}
	for i, d := range docs {
		if !bytes.Equal(d.Body, want[i]) {
			t.Fatalf("doc %s changed once its answer's buffer was reused: %.60q", d.ID, d.Body)
		}
		if d.ID == "" || d.Rev == "" || d.Revisions.IDs[0] == "" {
			t.Fatalf("doc %d lost its envelope: %+v", i, d)
		}
	}
}
