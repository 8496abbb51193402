package couch

import (
	"bytes"
	"io"
)

// eofTracker passes reads through and remembers whether its source ended
// and the last bytes read. mime/multipart's NextRawPart answers io.EOF both
// after the final boundary and when the stream ends inside a part's
// headers; endedAt tells the two apart.
type eofTracker struct {
	r    io.Reader
	eof  bool
	tail []byte // last bytes read, at most tailMax
}

const tailMax = 256

func (t *eofTracker) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		if n >= tailMax {
			t.tail = append(t.tail[:0], p[n-tailMax:n]...)
		} else {
			t.tail = append(t.tail, p[:n]...)
			if len(t.tail) > tailMax {
				t.tail = append(t.tail[:0], t.tail[len(t.tail)-tailMax:]...)
			}
		}
	}
	if err == io.EOF {
		t.eof = true
	}
	return n, err
}

// endedAt reports whether an io.EOF from a multipart reader over t is the
// real end: either the reader stopped before the source ended (it met the
// final boundary), or the source's last bytes, but for trailing
// whitespace, are the final boundary "--B--".
func (t *eofTracker) endedAt(boundary string) bool {
	if !t.eof {
		return true
	}
	tail := bytes.TrimRight(t.tail, " \t\r\n")
	return len(tail) >= len(boundary)+4 &&
		string(tail[len(tail)-len(boundary)-4:]) == "--"+boundary+"--"
}
