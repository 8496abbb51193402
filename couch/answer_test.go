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

// An attachment's body is kept in its answer's buffer, not copied: the
// answer gives the buffer up, so closing it (as the request's defer does)
// must not hand the bytes to the next answer; and an answer of known
// length over the pooled size is read into one buffer of that size.
func TestAnswer_AttachmentTakesTheBuffer(t *testing.T) {
	for _, n := range []int{1000, maxPooledAnswer + 1000} {
		body := bytes.Repeat([]byte{'a'}, n)
		resp := &http.Response{Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(n)}
		if err := bufferBody(resp); err != nil {
			t.Fatal(err)
		}
		got, err := readAttachment(resp.Body, int64(n))
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%d bytes: read %d, %v", n, len(got), err)
		}
		if n > maxPooledAnswer && cap(got) > n+bytes.MinRead {
			t.Errorf("%d bytes read into a buffer of %d", n, cap(got))
		}
		resp.Body.Close()
		for range 4 {
			b := answerBufs.Get().(*bytes.Buffer)
			b.Reset()
			b.Write(bytes.Repeat([]byte{'#'}, n))
			putAnswerBuf(b)
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("%d bytes: the attachment changed once its answer was closed and the pool reused", n)
		}
	}
	// A body read from a plain reader is cut after the limit.
	got, err := readAttachment(bytes.NewReader(make([]byte, 3<<20)), 1<<20)
	if err != nil || len(got) != 2<<20+1 {
		t.Fatalf("plain reader: %d bytes, %v", len(got), err)
	}
}
