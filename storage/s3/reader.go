package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sofadb/sofa/storage"
)

// Open opens the object for reading: one HeadObject now, ranged GETs as
// it is read.
func (s *Store) Open(ctx context.Context, name string) (storage.Reader, error) {
	bucket, key, err := Parse(name)
	if err != nil {
		return nil, err
	}
	h, err := s.c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return nil, s.fail(ctx, "open", bucket, key, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	return &reader{
		s: s, ctx: ctx, cancel: cancel, bucket: bucket, key: key,
		etag: aws.ToString(h.ETag), size: aws.ToInt64(h.ContentLength),
	}, nil
}

// reader reads an object in order with up to Transfers ranged GETs
// ahead of the caller.
type reader struct {
	s           *Store
	ctx         context.Context
	cancel      context.CancelFunc
	bucket, key string
	etag        string
	size        int64

	ahead   []*chunk // fetches started, in order
	nextOff int64    // offset of the next chunk to start
	cur     []byte   // what is left of the chunk being read
	curBuf  []byte   // that chunk's buffer
	err     error
}

type chunk struct {
	done chan struct{}
	data []byte
	err  error
}

func (r *reader) Size() int64 { return r.size }

// PrefersSequential: every ReadAt is a ranged GET, Read reads ahead
// (storage.Sequential).
func (r *reader) PrefersSequential() bool { return true }

func (r *reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	for len(r.cur) == 0 {
		r.fill()
		if len(r.ahead) == 0 {
			return 0, io.EOF
		}
		c := r.ahead[0]
		select {
		case <-c.done:
		case <-r.ctx.Done():
			r.err = r.ctx.Err()
			return 0, r.err
		}
		r.ahead = r.ahead[1:]
		putBuf(r.curBuf)
		r.curBuf = c.data
		if c.err != nil {
			r.err = c.err
			return 0, r.err
		}
		r.cur = c.data
		r.fill()
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// fill starts fetches until Transfers are ahead of the reader or the
// object ends. Memory: Transfers chunks in flight plus the one read.
func (r *reader) fill() {
	for len(r.ahead) < r.s.o.Transfers && r.nextOff < r.size {
		n := min(r.s.o.PartSize, r.size-r.nextOff)
		c := &chunk{done: make(chan struct{})}
		off := r.nextOff
		go func() {
			defer close(c.done)
			c.data = getBuf(int(r.s.o.PartSize))[:n]
			c.err = r.fetch(c.data, off)
		}()
		r.ahead = append(r.ahead, c)
		r.nextOff += n
	}
}

// ReadAt reads len(p) bytes at off with one ranged GET (io.EOF when the
// object ends first).
func (r *reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("s3: negative offset")
	}
	if off >= r.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), r.size-off)
	if err := r.fetch(p[:n], off); err != nil {
		return 0, err
	}
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

// fetch fills buf from the object at off, resuming where a broken answer
// stopped (the SDK retries the requests; this retries the bodies).
func (r *reader) fetch(buf []byte, off int64) error {
	got := 0
	loc := Scheme + r.bucket + "/" + r.key
	for attempt := 1; ; attempt++ {
		err := r.get(buf[got:], off+int64(got), &got)
		if err == nil {
			return nil
		}
		if r.ctx.Err() != nil {
			return fmt.Errorf("read archive %s: %w", loc, r.ctx.Err())
		}
		var perm *permanent
		if errors.As(err, &perm) || attempt >= r.s.o.MaxAttempts {
			return err
		}
		d := min(r.s.o.MaxBackoff, time.Duration(1<<min(attempt, 10))*50*time.Millisecond)
		d = d/2 + rand.N(d/2+1)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.ctx.Done():
			t.Stop()
		}
	}
}

// permanent marks an error no retry can fix.
type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

// get reads buf from off with one ranged GET, adding what it read to
// *got.
func (r *reader) get(buf []byte, off int64, got *int) error {
	rng := fmt.Sprintf("bytes=%d-%d", off, off+int64(len(buf))-1)
	in := &awss3.GetObjectInput{Bucket: &r.bucket, Key: &r.key, Range: &rng}
	if r.etag != "" {
		in.IfMatch = &r.etag
	}
	out, err := r.s.c.GetObject(r.ctx, in)
	if err != nil {
		if errCode(err) == "PreconditionFailed" || httpStatus(err) == 412 {
			return &permanent{fmt.Errorf("read archive %s%s/%s: the object was replaced while it was read", Scheme, r.bucket, r.key)}
		}
		return &permanent{r.s.fail(r.ctx, "read", r.bucket, r.key, err)}
	}
	defer out.Body.Close()
	n, err := io.ReadFull(out.Body, buf)
	*got += n
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		if aws.ToInt64(out.ContentLength) >= 0 && aws.ToInt64(out.ContentLength) < int64(len(buf)) {
			return &permanent{fmt.Errorf("read archive %s%s/%s: the object ends at %d bytes, it had %d when opened (truncated while read?)", Scheme, r.bucket, r.key, off+aws.ToInt64(out.ContentLength), r.size)}
		}
		return fmt.Errorf("read archive %s%s/%s: answer cut after %d of %d bytes", Scheme, r.bucket, r.key, n, len(buf))
	case err != nil:
		return fmt.Errorf("read archive %s%s/%s: %w", Scheme, r.bucket, r.key, err)
	}
	return nil
}

// Close stops the fetches ahead; their buffers are dropped.
func (r *reader) Close() error {
	r.cancel()
	for _, c := range r.ahead {
		<-c.done
		putBuf(c.data)
	}
	putBuf(r.curBuf)
	r.ahead, r.cur, r.curBuf = nil, nil, nil
	if r.err == nil {
		r.err = errors.New("s3: read after Close")
	}
	return nil
}
