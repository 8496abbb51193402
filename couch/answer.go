package couch

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"
)

// answer is a response body read whole inside its attempt (see
// Client.do), held in a pooled buffer: reading answers of about a
// megabyte (a `_bulk_get` of 500 revisions) into fresh buffers grown by
// doubling made about twice their size in garbage. Close returns the
// buffer to the pool, so nothing may keep a slice of it after Close: Read
// copies out, and the one parser that reads it in place (ReadBulkGet,
// through inPlace) copies what it keeps.
type answer struct {
	buf *bytes.Buffer
}

var errAnswerClosed = errors.New("couch: read of a closed answer")

func (a *answer) Read(p []byte) (int, error) {
	if a.buf == nil {
		return 0, errAnswerClosed
	}
	return a.buf.Read(p)
}

func (a *answer) Close() error {
	if a.buf != nil {
		putAnswerBuf(a.buf)
		a.buf = nil
	}
	return nil
}

// maxPooledAnswer is the largest buffer kept for reuse; a larger answer's
// buffer goes to the garbage collector.
const maxPooledAnswer = 8 << 20

var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func putAnswerBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooledAnswer {
		b.Reset()
		answerBufs.Put(b)
	}
}

// bufferBody replaces resp.Body by an in-memory copy of it (an answer);
// the error is the read error, if any (the original body is closed either
// way).
func bufferBody(resp *http.Response) error {
	var buf *bytes.Buffer
	if n := resp.ContentLength; n > maxPooledAnswer {
		// A large answer of known length (an attachment) gets a buffer of
		// its size: no pooled buffer grown by doubling. (ReadFrom wants
		// MinRead bytes free before it sees the end, hence the extra.)
		buf = bytes.NewBuffer(make([]byte, 0, n+bytes.MinRead))
	} else {
		buf = answerBufs.Get().(*bytes.Buffer)
		if n > 0 {
			buf.Grow(int(n) + bytes.MinRead)
		}
	}
	_, err := buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		putAnswerBuf(buf)
		return err
	}
	resp.Body = &answer{buf: buf}
	return nil
}

// takeBytes returns r's unread bytes and true when r is an answer, which
// gives them up: the caller owns them and Close no longer pools the buffer
// (an attachment's bytes are kept, not copied once more). Any other reader
// gives nil and false.
func takeBytes(r io.Reader) ([]byte, bool) {
	a, ok := r.(*answer)
	if !ok || a.buf == nil {
		return nil, false
	}
	b := a.buf.Bytes()
	a.buf = nil
	return b, true
}

// inPlace returns r's unread bytes as a *bytes.Buffer when r is an answer,
// so that a jsontext.Decoder parses them in place instead of copying them
// into its own buffer; what is decoded must be copied before r is closed.
// Any other reader is returned as it is.
func inPlace(r io.Reader) io.Reader {
	if a, ok := r.(*answer); ok && a.buf != nil {
		return a.buf
	}
	return r
}
